"""(being written for issue 10)"""

from jax2onnx.plugin import Lowerings

lowerings = Lowerings()
components = []

"""Every testcase of this pack, in every variant, exported and compared with JAX in onnxruntime.

jax2onnx-core's pytest plugin (installed with it) expands the testcases the pack declares in its
modules' ``components`` lists into one test per variant (static and symbolic dims, float32 and
float64). Run them with ``pytest tests``.
"""

from jax2onnx.testing import run_variant

JAX2ONNX_PACKS = ["jax2onnx-mypack"]


def test_testcase(jax2onnx_variant):
    run_variant(jax2onnx_variant)

"""A lowering for a primitive no other pack knows: ``mypack_softclip`` (example_library.softclip).

The interpreter calls the lowering once per equation of that primitive, with the ONNX values of
its operands; ``ctx.params`` holds the equation's static params (here ``limit``).
"""

from __future__ import annotations

from jax2onnx.dtypes import FLOAT_MATH
from jax2onnx.plugin import Lowerings

lowerings = Lowerings()


# dtypes=FLOAT_MATH: JAX computes float16/bfloat16 math in float32 (XLA on CPU), so the lowering
# computes in float32/float64; the interpreter casts other operand dtypes to the narrowest of these
# that holds them and casts back. (dtypes="Tanh" would instead ask the target onnxruntime which
# dtypes its Tanh kernels take, jax2onnx.ir.runtime.)
@lowerings.register("mypack_softclip", dtypes=FLOAT_MATH)
def lower_softclip(ctx, x):
    limit = ctx.params["limit"]
    # A Python number among an op's inputs becomes a constant of the other operand's dtype, so
    # this graph is float64 end to end in a float64 export.
    return ctx.op.Mul(ctx.op.Tanh(ctx.op.Div(x, limit)), limit)

"""A lowering for a primitive no other pack knows: ``mypack_softclip`` (example_library.softclip).

The interpreter calls the lowering once per equation of that primitive, with the ONNX values of
its operands; ``ctx.params`` holds the equation's static params (here ``limit``).
"""

from __future__ import annotations

from jax2onnx.dtypes import FLOAT_MATH
from jax2onnx.plugin import Lowerings

lowerings = Lowerings()


# dtypes=FLOAT_MATH: Tanh runs in float32/float64 in onnxruntime; the interpreter casts other
# operand dtypes (float16, bfloat16) to the narrowest of these that holds them and casts back.
@lowerings.register("mypack_softclip", dtypes=FLOAT_MATH)
def lower_softclip(ctx, x):
    limit = ctx.params["limit"]
    # A Python number among an op's inputs becomes a constant of the other operand's dtype, so
    # this graph is float64 end to end in a float64 export.
    return ctx.op.Mul(ctx.op.Tanh(ctx.op.Div(x, limit)), limit)

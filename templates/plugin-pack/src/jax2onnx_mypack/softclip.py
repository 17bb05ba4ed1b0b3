"""A lowering for a primitive no other pack knows: ``mypack_softclip`` (example_library.softclip).

The interpreter calls the lowering once per equation of that primitive, with the ONNX values of
its operands; ``ctx.params`` holds the equation's static params (here ``limit``).
"""

from __future__ import annotations

import jax.numpy as jnp
from jax2onnx.dtypes import FLOAT_MATH
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import example_library as lib

lowerings = Lowerings()


# dtypes=FLOAT_MATH: Tanh runs in float32/float64 in onnxruntime; the interpreter casts other
# operand dtypes (float16, bfloat16) to the narrowest of these that holds them and casts back.
@lowerings.register("mypack_softclip", dtypes=FLOAT_MATH)
def lower_softclip(ctx, x):
    limit = ctx.params["limit"]
    # A Python number among an op's inputs becomes a constant of the other operand's dtype, so
    # this graph is float64 end to end in a float64 export.
    return ctx.op.Mul(ctx.op.Tanh(ctx.op.Div(x, limit)), limit)


components = [
    Component(
        name="mypack.softclip",
        onnx=["Tanh", "Div", "Mul"],
        since="v0.1.0",
        description="example_library.softclip, a function on its own JAX primitive",
        testcases=[
            # Each testcase runs static and with the symbolic dim B, in float32 and float64:
            # exported, checked with onnx.checker, run in onnxruntime and compared with JAX.
            Testcase("softclip", lambda x: lib.softclip(x, limit=2.0), [("B", 5)],
                     expected_ops=["Tanh"], max_nodes=3),
            Testcase("softclip_in_a_model", lambda x, w: lib.softclip(jnp.tanh(x) @ w), [("B", 4), (4, 3)],
                     expected_ops=["Tanh", "MatMul"]),
        ],
    ),
]

"""lax elementwise lowerings. One-to-one ops are a table; the rest are small functions."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

lowerings = Lowerings()

#: lax primitive -> ONNX op, where the semantics match exactly (broadcasting is explicit in lax).
UNARY = {"sin": "Sin", "cos": "Cos", "exp": "Exp", "tanh": "Tanh", "neg": "Neg", "abs": "Abs"}
BINARY = {"add": "Add", "sub": "Sub", "mul": "Mul", "max": "Max", "min": "Min"}


def _one_to_one(op_type: str):
    def lower(ctx, *xs):
        return getattr(ctx.op, op_type)(*xs)

    lower.__name__ = f"lower_{op_type.lower()}"
    return lower


for _prim, _op in {**UNARY, **BINARY}.items():
    lowerings.add(_prim, _one_to_one(_op))


components = [
    Component(
        name=f"lax.{prim}",
        onnx=[op],
        since="v0.2.0",
        testcases=[Testcase(prim, getattr(jax.lax, prim), [(3,)] if prim in UNARY else [(3,), (3,)], expected_ops=[op])],
    )
    for prim, op in {**UNARY, **BINARY}.items()
] + [
    Component(
        name="lax.add_symbolic_demo",
        onnx=["Add"],
        testcases=[Testcase("add_dynamic_batch", lambda x, y: x + y, [("B", 4), ("B", 4)], expected_ops=["Add"])],
    )
]
del jnp

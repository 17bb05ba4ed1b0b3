"""MLP example: Linear → BatchNorm (eval mode) → Dropout → GELU → Linear."""

from __future__ import annotations

from typing import Any

import jax
from flax import nnx
from jax2onnx.testing import Component, Testcase

from ._checks import expect_bool_input


class MLP(nnx.Module):
    """The Flax README's MLP, with eval-mode BatchNorm so outputs are deterministic."""

    def __init__(self, din: int, dmid: int, dout: int, *, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(din, dmid, rngs=rngs)
        self.dropout = nnx.Dropout(rate=0.1, rngs=rngs)
        self.bn = nnx.BatchNorm(dmid, use_running_average=True, rngs=rngs)
        # Non-trivial running statistics: with the initial mean 0 / var 1 a broken normalisation
        # (e.g. one that ignores the statistics) would still match.
        k_mean, k_var = jax.random.split(rngs.params())
        self.bn.mean = nnx.BatchStat(jax.random.normal(k_mean, (dmid,)))
        self.bn.var = nnx.BatchStat(jax.random.uniform(k_var, (dmid,), minval=0.5, maxval=2.0))
        self.linear2 = nnx.Linear(dmid, dout, rngs=rngs)

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        x = nnx.gelu(self.dropout(self.bn(self.linear1(x)), deterministic=deterministic))
        return self.linear2(x)


def _mlp() -> MLP:
    return MLP(din=30, dmid=20, dout=10, rngs=nnx.Rngs(17))


components = [
    Component(
        name="MLP",
        kind="example",
        description="A simple Multi-Layer Perceptron (MLP) with BatchNorm, Dropout, and GELU activation.",
        onnx=["Gemm", "MatMul", "BatchNormalization", "Dropout", "Gelu"],
        since="v0.1.0",
        testcases=[
            Testcase("simple_mlp", factory=_mlp, input_shapes=[("B", 30)]),
            # `deterministic` becomes a bool graph input: the exported model decides at run time
            # whether dropout is active (fed True here, so results are comparable).
            Testcase(
                "simple_mlp_with_call_params",
                factory=_mlp,
                input_shapes=[("B", 30)],
                input_params={"deterministic": True},
                check=expect_bool_input("deterministic"),
            ),
        ],
    )
]

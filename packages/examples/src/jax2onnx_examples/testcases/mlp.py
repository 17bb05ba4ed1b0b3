"""MLP example: Linear → BatchNorm (eval mode) → Dropout → GELU → Linear.

The model is the quickstart MLP with ``deterministic`` as a call argument, defined once in the nnx
pack's testcases (:mod:`jax2onnx_nnx.testcases.models`).
"""

from __future__ import annotations

import jax
from flax import nnx
from jax2onnx.testing import Component, Testcase
from jax2onnx_nnx.testcases.models import MLPWithCallParams

from .helpers import expect_bool_input


def _mlp() -> MLPWithCallParams:
    m = MLPWithCallParams(din=30, dmid=20, dout=10, rngs=nnx.Rngs(17))
    # Non-trivial running statistics: with the initial mean 0 / var 1 a broken normalisation
    # (e.g. one that ignores the statistics) would still match.
    k_mean, k_var = jax.random.split(jax.random.key(17))
    m.bn.mean = nnx.BatchStat(jax.random.normal(k_mean, (20,)))
    m.bn.var = nnx.BatchStat(jax.random.uniform(k_var, (20,), minval=0.5, maxval=2.0))
    return m


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

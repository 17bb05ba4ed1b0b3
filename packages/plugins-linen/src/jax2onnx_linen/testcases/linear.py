"""Testcases of :mod:`jax2onnx_linen.linear` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax.numpy as jnp
from flax import linen as nn
from jax2onnx.testing import Component, Testcase

from ._testing import applied, bound

_SIGNED = {"low": -1.0, "high": 1.0}


class _DenseWithoutJit(nn.Module):
    """Dense inside a compact parent, called twice (two regions sharing nothing)."""

    @nn.compact
    def __call__(self, x):
        return nn.Dense(4, name="second")(jnp.tanh(nn.Dense(6, name="first")(x)))


components = [
    Component(
        name="linen.dense",
        onnx=["Gemm", "MatMul", "Add"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_dense", factory=applied(lambda: nn.Dense(5), (1, 8), **_SIGNED),
                     input_shapes=[("B", 8)], expected_ops=["Gemm"], max_nodes=1),
            Testcase("linen_dense_high_rank", factory=applied(lambda: nn.Dense(5), (1, 3, 4, 8), **_SIGNED),
                     input_shapes=[("B", 3, 4, 8)], expected_ops=["MatMul", "Add"],
                     forbidden_ops=["Reshape", "Shape", "Concat", "Gemm"], max_nodes=2),
            Testcase("linen_dense_no_bias", factory=applied(lambda: nn.Dense(5, use_bias=False), (1, 8), **_SIGNED),
                     input_shapes=[("B", 8)], expected_ops=["Gemm"], max_nodes=1),
            Testcase("linen_dense_1d_input", factory=applied(lambda: nn.Dense(3), (4,), **_SIGNED),
                     input_shapes=[(4,)], expected_ops=["MatMul", "Add"], max_nodes=2),
            # A bound module (model.bind(variables)) is the other documented input.
            Testcase("linen_dense_bound_module", factory=bound(lambda: _DenseWithoutJit(), (1, 8), **_SIGNED),
                     input_shapes=[("B", 8)], expected_ops=["Gemm", "Tanh"], max_nodes=3),
        ],
    ),
    Component(
        name="linen.dense_general",
        onnx=["Gemm", "MatMul", "Add", "Reshape"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_dense_general_two_axes",
                     factory=applied(lambda: nn.DenseGeneral(4, axis=(-2, -1)), (1, 5, 2, 3), **_SIGNED),
                     input_shapes=[("B", 5, 2, 3)], expected_ops=["MatMul", "Reshape"],
                     forbidden_ops=["Shape", "Concat"], max_nodes=3),
            Testcase("linen_dense_general_two_features",
                     factory=applied(lambda: nn.DenseGeneral((2, 4)), (1, 5, 3), **_SIGNED),
                     input_shapes=[("B", 5, 3)], expected_ops=["MatMul", "Reshape"],
                     forbidden_ops=["Shape", "Concat"], max_nodes=3),
            Testcase("linen_dense_general_2d", factory=applied(lambda: nn.DenseGeneral(6), (1, 4), **_SIGNED),
                     input_shapes=[("B", 4)], expected_ops=["Gemm"], max_nodes=1),
            # Contracting the middle axis: flax's own dot_general, lowered by the lax pack.
            Testcase("linen_dense_general_middle_axis",
                     factory=applied(lambda: nn.DenseGeneral(5, axis=1), (1, 4, 3), **_SIGNED),
                     input_shapes=[("B", 4, 3)]),
        ],
    ),
    Component(
        name="linen.einsum",
        onnx=["Einsum", "Add"],
        since="v0.4.2",
        testcases=[
            Testcase("linen_einsum_with_bias",
                     factory=applied(lambda: nn.Einsum((3, 4, 5), "nta,hab->nthb"), (1, 6, 4), **_SIGNED),
                     input_shapes=[("B", 6, 4)], expected_ops=["Einsum", "Add"], max_nodes=2),
            Testcase("linen_einsum_no_bias",
                     factory=applied(lambda: nn.Einsum((3, 4, 5), "nta,hab->nthb", use_bias=False), (1, 6, 4),
                                     **_SIGNED),
                     input_shapes=[("B", 6, 4)], expected_ops=["Einsum"], max_nodes=1),
        ],
    ),
]

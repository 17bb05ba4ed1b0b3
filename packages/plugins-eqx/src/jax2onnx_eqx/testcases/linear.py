"""Testcases of :mod:`jax2onnx_eqx.linear` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import equinox as eqx
import jax
from jax2onnx.testing import Component, Testcase

from ._testing import model, vmapped


def _ensemble():
    """One Linear per example, its weight vmapped with the input (a batched weight stays in the vmap)."""
    base = eqx.nn.Linear(8, 5, key=jax.random.key(0))
    return lambda ws, x: jax.vmap(lambda w, v: eqx.tree_at(lambda lin: lin.weight, base, w)(v))(ws, x)


components = [
    Component(
        name="eqx.linear",
        onnx=["MatMul", "Add", "Gemm"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_linear", factory=model(lambda k: eqx.nn.Linear(8, 5, key=k)), input_shapes=[(8,)],
                     expected_ops=["MatMul", "Add"], max_nodes=2),
            Testcase("eqx_linear_no_bias", factory=model(lambda k: eqx.nn.Linear(8, 5, use_bias=False, key=k)),
                     input_shapes=[(8,)], expected_ops=["MatMul"], max_nodes=1),
            # The usual way to batch an equinox layer: jax.vmap(linear) is one Gemm.
            Testcase("eqx_linear_vmapped", factory=model(lambda k: eqx.nn.Linear(8, 5, key=k), wrap=vmapped),
                     input_shapes=[("B", 8)], expected_ops=["Gemm"], max_nodes=1),
            Testcase("eqx_linear_vmapped_no_bias",
                     factory=model(lambda k: eqx.nn.Linear(8, 5, use_bias=False, key=k), wrap=vmapped),
                     input_shapes=[("B", 8)], expected_ops=["Gemm"], max_nodes=1),
            # Inside another vmapped function: the region is built outside the vmap, one Gemm.
            Testcase("eqx_linear_inside_vmapped_fn",
                     factory=model(lambda k: eqx.nn.Linear(8, 5, key=k), wrap=lambda m: jax.vmap(lambda v: m(v) * 2.0)),
                     input_shapes=[("B", 8)], expected_ops=["Gemm"], forbidden_ops=["MatMul"], max_nodes=2),
            # Two vmaps (batch=2): MatMul + Add over the leading axes.
            Testcase("eqx_linear_nested_vmap",
                     factory=model(lambda k: eqx.nn.Linear(8, 5, key=k), wrap=lambda m: jax.vmap(jax.vmap(m))),
                     input_shapes=[("B", 3, 8)], expected_ops=["MatMul", "Add"], max_nodes=2),
            # Weights vmapped too (an ensemble of Linears): equinox's math, as JAX batches it.
            Testcase("eqx_linear_vmapped_ensemble", factory=_ensemble, input_shapes=[("B", 5, 8), ("B", 8)]),
            Testcase("eqx_linear_scalar_in", factory=model(lambda k: eqx.nn.Linear("scalar", 3, key=k)),
                     input_shapes=[()]),
            Testcase("eqx_identity", factory=lambda: eqx.nn.Identity(), input_shapes=[("B", 3)], max_nodes=1),
        ],
    ),
]

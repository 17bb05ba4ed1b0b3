"""Testcases of :mod:`jax2onnx_jnp.reductions` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.testing import Component, Testcase

from .helpers import grad_of_sum


def _var_ddof1(x):
    return jnp.var(x, axis=1, ddof=1)


def _logsumexp(x):
    return jax.nn.logsumexp(x, axis=-1)


def _norm_rows(x):
    return jnp.linalg.norm(x, axis=1)


def _cumsum0(x):
    return jnp.cumsum(x, axis=0)


_HUGE = np.array([[1e4, 1e4 - 1.0, 0.0], [-np.inf, 0.0, 1.0], [-3e38, -3e38, -3e38]], np.float32)


def _case(name, fn, shapes, ops, **kw):
    return Testcase(name, fn, shapes, expected_ops=ops, **kw)


components = [
    Component(name="jnp.prod", onnx=["ReduceProd"], since="v0.6.2", testcases=[
        _case("basic_prod", lambda x: jnp.prod(x), [(3, 4)], ["ReduceProd"]),
        _case("prod_with_axis", lambda x: jnp.prod(x, axis=1), [("B", 4)], ["ReduceProd"]),
        _case("prod_with_keepdims", lambda x: jnp.prod(x, axis=0, keepdims=True), [(3, "B")], ["ReduceProd"],
              forbidden_ops=["Reshape", "Unsqueeze"]),
        # Static: JAX's derivative of reduce_prod needs a static shape.
        Testcase("prod_keepdims_grad", grad_of_sum(lambda x: jnp.prod(x, axis=0, keepdims=True)), [(3, 4)]),
    ]),
    Component(name="jnp.sum", onnx=["ReduceSum"], since="v0.7.0", testcases=[
        _case("sum_keepdims", lambda x: jnp.sum(x, axis=(0, 2), keepdims=True), [("B", 3, 4)], ["ReduceSum"],
              forbidden_ops=["Reshape", "Unsqueeze"]),
        _case("sum_axis", lambda x: jnp.sum(x, axis=-1), [("B", 4)], ["ReduceSum"]),
        Testcase("sum_keepdims_vmap", jax.vmap(lambda x: jnp.sum(x, axis=0, keepdims=True)), [("B", 3, 4)]),
    ]),
    Component(name="jnp.max", onnx=["ReduceMax"], since="v0.7.0", testcases=[
        _case("max_keepdims", lambda x: jnp.max(x, axis=1, keepdims=True), [("B", 4)], ["ReduceMax"],
              forbidden_ops=["Reshape", "Unsqueeze"]),
        _case("max_all", lambda x: jnp.max(x), [("B", 4)], ["ReduceMax"]),
        Testcase("max_keepdims_vmap", jax.vmap(lambda x: jnp.max(x, axis=1, keepdims=True)), [("B", 3, 4)]),
        Testcase("max_keepdims_grad", grad_of_sum(lambda x: jnp.max(x, axis=1, keepdims=True)), [("B", 4)]),
    ]),
    Component(name="jnp.min", onnx=["ReduceMin"], since="v0.7.0", testcases=[
        _case("min_keepdims", lambda x: jnp.min(x, axis=-1, keepdims=True), [("B", 4)], ["ReduceMin"],
              forbidden_ops=["Reshape", "Unsqueeze"]),
        Testcase("min_keepdims_grad", grad_of_sum(lambda x: jnp.min(x, axis=-1, keepdims=True)), [("B", 4)]),
    ]),
    Component(name="jnp.mean", onnx=["ReduceMean"], since="v0.7.0", testcases=[
        _case("mean", lambda x: jnp.mean(x), [("B", 4)], ["ReduceMean"], forbidden_ops=["ReduceSum", "Div"]),
        _case("mean_axis_keepdims", lambda x: jnp.mean(x, axis=(1, 2), keepdims=True), [("B", 3, 4)],
              ["ReduceMean"], forbidden_ops=["ReduceSum", "Div"]),
        Testcase("mean_vmap", jax.vmap(lambda x: jnp.mean(x, axis=0)), [("B", 3, 4)]),
        Testcase("mean_grad", grad_of_sum(lambda x: jnp.mean(x, axis=1)), [("B", 4)]),
    ]),
    Component(name="jnp.var", onnx=["ReduceMean"], since="v0.7.0", testcases=[
        _case("var", lambda x: jnp.var(x, axis=-1), [("B", 5)], ["ReduceMean"]),
        _case("var_ddof1", _var_ddof1, [(3, "B", 4)], ["ReduceMean"], static_sizes={"B": 4}),
        Testcase("var_vmap", jax.vmap(_var_ddof1), [("B", 3, 5, 4)]),
        Testcase("var_grad", grad_of_sum(_var_ddof1), [(3, "B", 4)], rtol=1e-3, atol=1e-4),
    ]),
    Component(name="jnp.std", onnx=["ReduceMean", "Sqrt"], since="v0.7.0", testcases=[
        _case("std", lambda x: jnp.std(x, axis=0, keepdims=True), [("B", 5)], ["ReduceMean", "Sqrt"]),
        _case("std_all", lambda x: jnp.std(x), [("B", 5)], ["ReduceMean", "Sqrt"]),
        Testcase("std_vmap", jax.vmap(lambda x: jnp.std(x, axis=0)), [("B", 3, 5)]),
        Testcase("std_grad", grad_of_sum(lambda x: jnp.std(x, axis=1)), [("B", 5)], rtol=1e-3, atol=1e-4),
    ]),
    Component(name="nn.logsumexp", onnx=["ReduceLogSumExp"], since="v0.7.0", testcases=[
        _case("logsumexp", _logsumexp, [("B", 5)], ["ReduceLogSumExp"]),
        _case("logsumexp_keepdims", lambda x: jax.scipy.special.logsumexp(x, axis=(0, 1), keepdims=True),
              [(3, "B")], ["ReduceLogSumExp"]),
        Testcase("logsumexp_huge_values", _logsumexp, input_values=[_HUGE], expected_ops=["ReduceLogSumExp"],
                 description="no overflow for large logits; -inf entries as in JAX"),
        Testcase("logsumexp_vmap", jax.vmap(_logsumexp), [("B", 3, 5)]),
        Testcase("logsumexp_grad", grad_of_sum(_logsumexp), [("B", 5)]),
    ]),
    Component(name="jnp.linalg.norm", onnx=["ReduceL2", "ReduceL1"], since="v0.7.0", testcases=[
        _case("linalg_norm_vector", _norm_rows, [("B", 4)], ["ReduceL2"]),
        _case("linalg_norm_flat", lambda x: jnp.linalg.norm(x), [("B", 3, 4)], ["ReduceL2"]),
        _case("linalg_norm_fro", lambda x: jnp.linalg.norm(x, "fro", axis=(1, 2), keepdims=True), [("B", 3, 4)],
              ["ReduceL2"]),
        _case("linalg_norm_l1", lambda x: jnp.linalg.norm(x, 1, axis=-1), [("B", 4)], ["ReduceL1"]),
        Testcase("linalg_norm_vmap", jax.vmap(_norm_rows), [("B", 3, 4)]),
        Testcase("linalg_norm_grad", grad_of_sum(_norm_rows), [("B", 4)], rtol=1e-3, atol=1e-4),
    ]),
    Component(name="jnp.cumsum", onnx=["CumSum"], since="v0.7.0", testcases=[
        _case("cumsum_axis0", _cumsum0, [("B", 4)], ["CumSum"]),
        _case("cumsum_flat", lambda x: jnp.cumsum(x), [("B", 3)], ["CumSum"]),
        _case("cumsum_int", lambda x: jnp.cumsum(x, axis=-1), [jax.ShapeDtypeStruct(("B", 5), jnp.int32)],
              ["CumSum"]),
        # no CumSum kernel for uint32: the fused form declines, the lax body sums in int64
        Testcase("cumsum_uint32_wraps", lambda x: jnp.cumsum(x, axis=-1), [jax.ShapeDtypeStruct(("B", 5), jnp.uint32)],
                 input_generator=lambda rng, shape, dtype: rng.integers(0, 2**32, size=shape).astype(dtype)),
        Testcase("cumsum_vmap", jax.vmap(_cumsum0), [("B", 3, 4)]),
        Testcase("cumsum_grad", grad_of_sum(_cumsum0), [("B", 4)], rtol=1e-3, atol=1e-4),
    ]),
]

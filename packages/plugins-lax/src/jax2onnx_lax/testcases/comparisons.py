"""Testcases of :mod:`jax2onnx_lax.comparisons` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ._testdata import f32, ints, spec

_I32 = jnp.int32


_NANS = [f32(1.0, np.nan, np.nan, -0.0, np.inf), f32(1.0, 1.0, np.nan, 0.0, np.inf)]


def _comparison_component(prim, op, since):
    fn = getattr(lax, prim)
    ops = [op, "Not"] if prim == "ne" else [op]
    return Component(f"lax.{prim}", onnx=ops, since=since, testcases=[
        Testcase(prim, fn, [("B", 4), ("B", 4)], expected_ops=ops),
        Testcase(f"{prim}_int32", fn, [spec("B", 4), spec("B", 4)], expected_ops=ops),
        Testcase(f"{prim}_bool", fn, [spec("B", 4, dtype=jnp.bool_), spec("B", 4, dtype=jnp.bool_)]),
        Testcase(f"{prim}_nan_and_signed_zero", fn, input_values=_NANS, expected_ops=ops),
    ])


components = [
    _comparison_component("eq", "Equal", "v0.2.0"),
    _comparison_component("ne", "Equal", "v0.2.0"),
    _comparison_component("lt", "Less", "v0.2.0"),
    _comparison_component("le", "LessOrEqual", "v0.7.0"),
    _comparison_component("gt", "Greater", "v0.2.0"),
    _comparison_component("ge", "GreaterOrEqual", "v0.7.0"),
    Component("lax.select_n", onnx=["Where"], since="v0.2.0", testcases=[
        Testcase("select_n_bool_predicate_two_cases_float", lax.select_n,
                 [spec("B", 3, dtype=jnp.bool_), ("B", 3), ("B", 3)], expected_ops=["Where"]),
        Testcase("select_n_bool_predicate_two_cases_int", lax.select_n,
                 [spec("B", 3, dtype=jnp.bool_), spec("B", 3), spec("B", 3)], expected_ops=["Where"]),
        Testcase("select_n_bool_predicate_scalar_broadcast", lax.select_n,
                 [spec(dtype=jnp.bool_), ("B", 3), ("B", 3)], expected_ops=["Where"]),
        Testcase("select_n_int_indices_three_cases", lax.select_n,
                 [spec("B", 4), ("B", 4), ("B", 4), ("B", 4)], expected_ops=["Where", "Less"]),
        Testcase("select_n_int_indices_four_cases", lax.select_n,
                 [spec("B", 4), ("B", 4), ("B", 4), ("B", 4), ("B", 4)], expected_ops=["Where", "Less"]),
        Testcase("select_n_bool_cases", lax.select_n, [spec("B", 3, dtype=jnp.bool_)] * 3, expected_ops=["Where"]),
        Testcase("select_n_int16_cases", lambda p, a, b: lax.select_n(p, a, b),
                 [spec("B", 3, dtype=jnp.bool_), spec("B", 3, dtype=jnp.int16), spec("B", 3, dtype=jnp.int16)]),
        Testcase("select_n_one_case", lambda x: lax.select_n(jnp.ones(x.shape, bool), x), [("B", 3)]),
        Testcase("where_jnp", lambda x, y: jnp.where(x > 0, x, y), [("B", 3), ("B", 3)], expected_ops=["Where"]),
        # out-of-range indices (negative, too large) pick the first/last case like JAX's lowering
        Testcase("select_n_int_indices_out_of_range", lax.select_n,
                 [spec("B", 4), ("B", 4), ("B", 4), ("B", 4)], input_generator=ints(-3, 6)),
    ]),
]

"""Testcases of :mod:`jax2onnx_lax.total_order` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax2onnx import compat
from jax2onnx.testing import Component, Testcase

from ._testdata import f32

_EDGES = f32(-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan, 2.0)


def _all_pairs(fn):
    """fn on every pair of the edge values (an outer comparison table)."""
    return lambda x: fn(x[:, None], x[None, :])


def _prim(name):
    return compat.lax_primitive(name)


components = [
    Component("lax.lt_to", onnx=["Less", "IsNaN", "Equal"], since="v0.8.0", testcases=[
        Testcase("lt_to_edges", _all_pairs(lambda a, b: _prim("lt_to").bind(a, b)), input_values=[_EDGES]),
        Testcase("le_to_edges", _all_pairs(lambda a, b: _prim("le_to").bind(a, b)), input_values=[_EDGES]),
        Testcase("eq_to_edges", _all_pairs(lambda a, b: _prim("eq_to").bind(a, b)), input_values=[_EDGES]),
        Testcase("searchsorted", lambda s, v: jnp.searchsorted(jnp.sort(s), v), [(6,), ("B",)]),
        Testcase("searchsorted_right", lambda s, v: jnp.searchsorted(jnp.sort(s), v, side="right"), [(6,), ("B",)]),
        # bfloat16 keys get the NaN/zero rules too; bools compare as False < True
        Testcase("searchsorted_bfloat16_edges",
                 lambda s, v: jnp.searchsorted(jnp.sort(s.astype(jnp.bfloat16)), v.astype(jnp.bfloat16)),
                 input_values=[_EDGES, _EDGES[::-1]]),
        Testcase("searchsorted_bool", lambda s, v: jnp.searchsorted(jnp.sort(s), v, side="right"),
                 input_values=[np.asarray([True, False, True, False]), np.asarray([False, True, True])]),
        Testcase("le_to_bool", _all_pairs(lambda a, b: _prim("le_to").bind(a, b)),
                 input_values=[np.asarray([False, True])]),
        Testcase("digitize", lambda x: jnp.digitize(x, jnp.asarray([-1.0, 0.0, 0.5, 2.0], x.dtype)), [("B",)]),
        Testcase("interp", lambda x: jnp.interp(x, jnp.linspace(-2, 2, 5, dtype=x.dtype),
                                                jnp.asarray([0.0, 1.0, 4.0, 1.0, 0.0], x.dtype)), [("B",)]),
        Testcase("histogram", lambda x: jnp.histogram(x, bins=4, range=(-2.0, 2.0))[0], [(10,)]),
    ]),
]

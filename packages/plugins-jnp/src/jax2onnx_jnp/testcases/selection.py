"""Testcases of :mod:`jax2onnx_jnp.selection` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax2onnx.testing import Component, Testcase

from .helpers import grad_of_sum


def _where_simple(c, x, y):
    return jnp.where(c > 0, x, y)


def _select3(x):
    return jnp.select([x < -1.0, x > 1.0], [x * 2.0, -x], default=0.5)


def _clip01(x):
    return jnp.clip(x, 0.0, 1.0)


_B3 = ("B", 3)


components = [
    Component(name="jnp.add", onnx=["Add"], since="v0.1.0", testcases=[
        Testcase("add", lambda x, y: jnp.add(x, y), [_B3, _B3], expected_ops=["Add"]),
        Testcase("add_broadcast", lambda x, y: jnp.add(x, y), [_B3, (3,)], expected_ops=["Add"]),
    ]),
    Component(name="jnp.where", onnx=["Where"], since="v0.5.2", testcases=[
        Testcase("where_simple", _where_simple, [_B3, _B3, _B3], expected_ops=["Where"],
                 forbidden_ops=["Expand"]),
        Testcase("where_broadcast", lambda c, x, y: jnp.where(c > 0, x, y), [("B", 1), (1, 3), ("B", 3)],
                 expected_ops=["Where"]),
        Testcase("where_multidim_condition_scalar_branches_broadcast", lambda x: jnp.where(x > 0, 1.0, -1.0),
                 [("B", 3, 4)], expected_ops=["Where"], forbidden_ops=["Expand"]),
        Testcase("where_A", lambda c, x: jnp.where(c, x, 0.0),
                 [jax.ShapeDtypeStruct(_B3, jnp.bool_), _B3], expected_ops=["Where"]),
        Testcase("where_B", lambda c, x: jnp.where(c, 1, x),
                 [jax.ShapeDtypeStruct(_B3, jnp.int32), jax.ShapeDtypeStruct(_B3, jnp.int32)],
                 expected_ops=["Where"], description="integer condition: nonzero is true"),
        Testcase("where_jax_int_literals_broadcast_f64_mode", lambda x: jnp.where(x > 0, 1, 0), [_B3],
                 expected_ops=["Where"]),
        Testcase("where_vmap", jax.vmap(_where_simple), [("B", 2, 3)] * 3),
        Testcase("where_grad", grad_of_sum(_where_simple, argnums=1), [_B3, _B3, _B3]),
    ]),
    Component(name="jnp.select", onnx=["Where"], since="v0.6.1", testcases=[
        Testcase("select", _select3, [("B", 4)], expected_ops=["Where"], input_generator=lambda r, s, d:
                 r.uniform(-3, 3, s).astype(d)),
        Testcase("select_arrays_default", lambda c, a, b: jnp.select([c > 0], [a], b), [_B3, _B3, _B3],
                 expected_ops=["Where"]),
        Testcase("select_vmap", jax.vmap(_select3), [("B", 2, 4)]),
        Testcase("select_grad", grad_of_sum(_select3), [("B", 4)]),
    ]),
    Component(name="jnp.clip", onnx=["Clip"], since="v0.7.0", testcases=[
        Testcase("clip", _clip01, [_B3], expected_ops=["Clip"], forbidden_ops=["Max", "Min"]),
        Testcase("clip_min_only", lambda x: jnp.clip(x, min=-0.5), [_B3], expected_ops=["Clip"]),
        Testcase("clip_array_bounds", lambda x, lo: jnp.clip(x, lo, lo + 1.0), [_B3, ()], expected_ops=["Clip"]),
        Testcase("clip_int", lambda x: jnp.clip(x, 1, 3), [jax.ShapeDtypeStruct(_B3, jnp.int32)],
                 expected_ops=["Clip"]),
        Testcase("clip_vmap", jax.vmap(_clip01), [("B", 2, 3)]),
        Testcase("clip_grad", grad_of_sum(_clip01), [_B3]),
    ]),
]

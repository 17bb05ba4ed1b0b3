"""Testcases of :mod:`jax2onnx_eqx.internals` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.testing import Component, Testcase

from ._testing import model


def _any_all(x):
    return eqxi.unvmap_any(x > 0.5), eqxi.unvmap_all(x > -3.0)


def _checked(x):
    """A computation guarded as library code guards it: the checks leave no node."""
    x = eqx.error_if(x, jnp.any(jnp.isnan(x)), "NaN input")
    y = jnp.tanh(x) * 2.0
    return eqx.branched_error_if(y, jnp.abs(y) > 5.0, jnp.int32(0), ["out of range"])


def _checked_nan(x):
    """``on_error="nan"``: the checks are equinox's own cond, NaN where the predicate holds anywhere.
    The same predicate once each way round, so one output is NaN and the other ``x`` for any input."""
    first = x[0, 0] > 0.0
    return (eqx.error_if(x * 2.0, first, "first entry positive", on_error="nan"),
            eqx.error_if(x * 2.0, jnp.logical_not(first), "first entry not positive", on_error="nan"))


def _checked_traced_before():
    """The check in a jit that JAX traced before the export (at the static variant's shape): the
    export reuses that jaxpr, so it sees equinox's callbacks in a cond instead of its patch."""
    checked = jax.jit(_checked)
    checked(jnp.ones((3, 5), jax.dtypes.canonicalize_dtype(jnp.float64)))
    return lambda x: checked(x) * 2.0


def _loop(kind):
    """equinox's own while_loop (as diffrax uses it): nonbatchable, unvmap_any, select_if_vmap."""

    def run(x):
        def body(carry):
            i, v = carry
            return i + 1, v * 0.5 + jnp.sin(v)

        return eqxi.while_loop(lambda c: c[0] < 4, body, (jnp.int32(0), x), max_steps=6, kind=kind)[1]

    return run


def _select_if_vmap(pred, x, y):
    return eqxi.select_if_vmap_p.bind(pred, x, y)


def _select_unbatched(x, y):
    # A False predicate too: JAX returns x (the predicate is never read outside vmap).
    return _select_if_vmap(jnp.asarray(False), x, y), _select_if_vmap(x[0] > 0.0, x, y)


def _select_batched_pred(p, x, y):
    # A batched predicate: equinox's batching rule binds lax.select, a Where per member.
    return jax.vmap(lambda pi, xi, yi: _select_if_vmap(pi > 0.0, xi, yi))(p, x, y)


def _select_unbatched_pred(x, y):
    # Under vmap with an unbatched predicate the primitive stays select_if_vmap: x again.
    return jax.vmap(lambda xi, yi: _select_if_vmap(jnp.asarray(False), xi, yi))(x, y)


def _scaled_mlp(key):
    return eqx.nn.MLP(4, 3, 8, 2, key=key)


components = [
    Component(
        name="eqx.unvmap",
        onnx=["ReduceSum", "ReduceMax", "Greater", "Equal"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_unvmap_any_all", _any_all, [("B", 3)], expected_ops=["ReduceSum"]),
            # Under vmap the predicate is reduced over the batch too: one answer for all members.
            Testcase("eqx_unvmap_any_vmapped", jax.vmap(lambda x: x * eqxi.unvmap_any(x > 1.0)), [("B", 3)],
                     expected_ops=["ReduceSum"]),
            Testcase("eqx_unvmap_max", lambda n: eqxi.unvmap_max(n) + n,
                     [jax.ShapeDtypeStruct(("B", 4), np.int32)], expected_ops=["ReduceMax"]),
            Testcase("eqx_unvmap_any_empty", lambda x: eqxi.unvmap_any(x > 0.0), [(0, 3)],
                     expected_ops=["ReduceSum"]),
        ],
    ),
    Component(
        name="eqx.internal_primitives",
        onnx=["Identity", "Where", "Loop"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_nonbatchable", lambda x: eqxi.nonbatchable(x) * 2.0, [("B", 3)]),
            Testcase("eqx_select_if_vmap_unbatched", _select_unbatched, [("B", 3), ("B", 3)],
                     forbidden_ops=["Where"]),
            Testcase("eqx_select_if_vmap_false_pred", _select_unbatched, input_values=[
                np.array([1.0, 2.0], np.float32), np.array([10.0, 20.0], np.float32)], forbidden_ops=["Where"]),
            Testcase("eqx_select_if_vmap_vmapped", _select_batched_pred, [("B",), ("B", 3), ("B", 3)],
                     expected_ops=["Where"]),
            Testcase("eqx_select_if_vmap_vmapped_unbatched_pred", _select_unbatched_pred, [("B", 3), ("B", 3)],
                     forbidden_ops=["Where"]),
            Testcase("eqx_while_loop_checkpointed", _loop("checkpointed"), [("B", 3)], expected_ops=["Loop"]),
            Testcase("eqx_while_loop_bounded", _loop("bounded"), [("B", 3)]),
            Testcase("eqx_while_loop_lax", _loop("lax"), [("B", 3)]),
        ],
    ),
    Component(
        name="eqx.error_if",
        onnx=[],
        since="v0.7.0",
        description="runtime checks follow EQX_ON_ERROR: nan is an If computing equinox's NaN, raise and "
                    "breakpoint are dropped with a warning naming the check (no node), off leaves nothing; "
                    "trace-time-known failures still raise",
        testcases=[
            Testcase("eqx_error_if_dropped", _checked, [("B", 5)], forbidden_ops=["If"], max_nodes=3),
            Testcase("eqx_error_if_vmapped", jax.vmap(_checked), [("B", 5)], forbidden_ops=["If"], max_nodes=3),
            Testcase("eqx_error_if_traced_before", factory=_checked_traced_before, input_shapes=[("B", 5)],
                     forbidden_ops=["If"], max_nodes=4),
            # static shapes: equinox builds its NaN with np.broadcast_to, which takes no symbolic size
            Testcase("eqx_error_if_nan", _checked_nan, [(4, 5)], expected_ops=["If"]),
            # Under vmap a row's failure makes the whole batch NaN (equinox's unvmap_any), in both.
            Testcase("eqx_error_if_nan_vmapped",
                     jax.vmap(lambda r: eqx.error_if(r * 2.0, r[0] > 0.0, "first entry positive", on_error="nan")),
                     [("B", 5)], expected_ops=["If"]),
        ],
    ),
    Component(
        name="eqx.filter_transforms",
        onnx=["MatMul", "Add"],
        since="v0.7.0",
        description="eqx.filter_jit and eqx.filter_vmap are transparent",
        testcases=[
            Testcase("eqx_filter_jit", factory=model(_scaled_mlp, wrap=eqx.filter_jit), input_shapes=[(4,)],
                     expected_ops=["MatMul"]),
            # filter_vmap is jax.vmap underneath: the Linears' regions are built around the batch, Gemm.
            Testcase("eqx_filter_vmap", factory=model(_scaled_mlp, wrap=eqx.filter_vmap), input_shapes=[("B", 4)],
                     expected_ops=["Gemm"], forbidden_ops=["MatMul"]),
        ],
    ),
]

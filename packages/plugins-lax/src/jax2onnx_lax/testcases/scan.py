"""Testcases of :mod:`jax2onnx_lax.scan` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.ir.proto_walk import nodes
from jax2onnx.testing import Component, Testcase

from .control_flow import loop_state_static


def scan_cumsum(xs):
    return lax.scan(lambda c, x: (c + x, c + x), jnp.zeros(xs.shape[1:], xs.dtype), xs)


def scan_carry_only(x):
    return lax.scan(lambda c, _: (c * 0.9 + 1.0, None), x, None, length=4)[0]


def scan_multiple_sequences(xs, ys):
    def step(c, xy):
        x, y = xy
        return c + x * y, x - y

    return lax.scan(step, jnp.zeros(xs.shape[1:], xs.dtype), (xs, ys))


def scan_multiple_carry(xs):
    def step(carry, x):
        s, p = carry
        return (s + x, p * 0.5 + x), s * p

    return lax.scan(step, (jnp.zeros(xs.shape[1:], xs.dtype), jnp.ones(xs.shape[1:], xs.dtype)), xs)


def scan_matrix_carry_multidim_xs(init, xs):
    # carry (3, 3), xs (T, 3, 3): a matrix recurrence that keeps its static shape in the body.
    return lax.scan(lambda m, x: (jnp.tanh(m * x + 0.1), jnp.sum(m, axis=0)), init, xs)


def scan_reverse(xs):
    return lax.scan(lambda c, x: (c * 0.5 + x, c), jnp.zeros(xs.shape[1:], xs.dtype), xs, reverse=True)


def scan_reverse_no_xs(x):
    return lax.scan(lambda c, _: (c + 1.0, c * 2.0), x, None, length=3, reverse=True)


def scan_closed_over_constant(xs, w):
    table = jnp.asarray(np.linspace(-1.0, 1.0, 4), dtype=xs.dtype)
    return lax.scan(lambda c, x: (c * table + x * w, c), jnp.zeros_like(w), xs, unroll=2)


def scan_nested_cond(xs):
    def step(c, x):
        c = lax.cond(jnp.sum(x) > 0, lambda v: v + x, lambda v: v - x, c)
        return c, c

    return lax.scan(step, jnp.zeros(xs.shape[1:], xs.dtype), xs)


def scan_nested_fori(xs):
    def step(c, x):
        inner = lax.fori_loop(0, 2, lambda i, v: v * 0.5 + x, c)
        return inner, inner.sum()

    return lax.scan(step, jnp.zeros(xs.shape[1:], xs.dtype), xs)


# Carries JAX forwards: a carry the body returns unchanged leaves the scan as a constant (num_carry
# drops), so these export a Loop/Scan with fewer (or no) state variables.


def scan_carry_passthrough(x):
    return lax.scan(lambda c, _: (c, jnp.sin(c) * 2.0), x, None, length=3)[1]


def scan_carry_passthrough_pad(x):
    return lax.scan(lambda c, _: (c, jnp.pad(jnp.sin(c), 1) * 2.0), x, None, length=3)[1]


def scan_carry_passthrough_xs(xs, c0):
    return lax.scan(lambda c, x: (c, jnp.sin(c) * x), c0, xs)[1]


def scan_zero_length(c0, xs):
    # onnxruntime's Scan fails over zero iterations: static T=0 returns the carry and empty ys
    # directly; a symbolic T is an If on T == 0 (tests/test_scan_zero_length.py runs T=0 in it).
    return lax.scan(lambda c, x: (c + x, (c * x, jnp.sum(x))), c0, xs, reverse=True)


def scan_zero_length_no_xs(c0):
    # A Loop of zero iterations stacks its ys as (0, 0) in onnxruntime; JAX's are (0, 3).
    return lax.scan(lambda c, _: (c + 1.0, c * 2.0), c0, None, length=0)


def _zero_length_form(model, variant):
    ops = {n.op_type for n in model.graph.node}
    if variant.symbolic:
        assert "If" in ops, f"{variant.id}: a symbolic length needs the If on length == 0, got {sorted(ops)}"
    else:
        assert not {"Scan", "If"} & ops, f"{variant.id}: a static length 0 needs no Scan, got {sorted(ops)}"


def scan_carry_unused(x):
    # The carry is updated but no y reads it, and only the ys are returned.
    return lax.scan(lambda c, _: (c + 1.0, jnp.cos(x) * 3.0), x, None, length=4)[1]


def scan_carry_partly_used(x, y):
    # Three carries: one passes through, one is updated, one is updated but never read by the ys.
    def step(carry, _):
        a, b, n = carry
        return (a, b * 0.5 + a, n + 1.0), jnp.tanh(b) + a

    (a, b, n), ys = lax.scan(step, (x, y, jnp.zeros_like(x)), None, length=3)
    return b, ys


components = [
    Component(
        name="lax.scan",
        onnx=["Scan", "Loop"],
        since="v0.5.1",
        testcases=[
            Testcase("scan_cumsum", scan_cumsum, [("T", 3)], expected_ops=["Scan"]),
            Testcase("scan_carry_only", scan_carry_only, [("B", 3)], expected_ops=["Loop"]),
            Testcase("scan_multiple_sequences", scan_multiple_sequences, [("T", 2), ("T", 2)], expected_ops=["Scan"]),
            Testcase("scan_multiple_carry", scan_multiple_carry, [("T", 3)], expected_ops=["Scan"]),
            Testcase("scan_matrix_carry_multidim_xs", scan_matrix_carry_multidim_xs, [(3, 3), ("T", 3, 3)],
                     expected_ops=["Scan"], check=lambda m, _variant: _scan_state_static(m, [3, 3])),
            Testcase("scan_reverse", scan_reverse, [("T", 2)], expected_ops=["Scan"]),
            Testcase("scan_reverse_no_xs", scan_reverse_no_xs, [("B",)], expected_ops=["Loop"]),
            Testcase("scan_closed_over_constant", scan_closed_over_constant, [("T", 4), (4,)], expected_ops=["Scan"]),
            Testcase("scan_lax_map", lambda xs: lax.map(lambda r: jnp.sin(r) * jnp.sum(r), xs), [("T", 3)],
                     expected_ops=["Scan"]),
            Testcase("scan_nested_cond", scan_nested_cond, [("T", 2)], expected_ops=["Scan", "If"]),
            Testcase("scan_carry_passthrough", scan_carry_passthrough, [("B", 3)], expected_ops=["Loop"]),
            Testcase("scan_carry_passthrough_pad", scan_carry_passthrough_pad, [("B", 3)], expected_ops=["Loop"]),
            Testcase("scan_carry_passthrough_xs", scan_carry_passthrough_xs, [("T", 3), (3,)], expected_ops=["Scan"]),
            Testcase("scan_carry_unused", scan_carry_unused, [("B", 3)]),
            Testcase("scan_zero_length", scan_zero_length, [(3,), ("T", 3)], static_sizes={"T": 0}, check=_zero_length_form),
            Testcase("scan_zero_length_no_xs", scan_zero_length_no_xs, [("B", 3)], forbidden_ops=["Loop"]),
            Testcase("scan_carry_partly_used", scan_carry_partly_used, [("B", 3), ("B", 3)], expected_ops=["Loop"]),
            Testcase("scan_nested_fori", scan_nested_fori, [("T", 3)], expected_ops=["Scan", "Loop"],
                     check=lambda m, _variant: loop_state_static(m, [3])),
        ],
    ),
]


def _scan_state_static(model, dims):
    for n in nodes(model):  # a symbolic length puts the Scan in an If branch
        if n.op_type == "Scan":
            body = next(a.g for a in n.attribute if a.name == "body")
            shape = [d.dim_value if d.HasField("dim_value") else None for d in body.input[0].type.tensor_type.shape.dim]
            assert shape == dims, f"Scan state typed {shape}, JAX knows {dims}"
            return
    raise AssertionError("no Scan node")

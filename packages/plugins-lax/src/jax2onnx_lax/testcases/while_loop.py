"""Testcases of :mod:`jax2onnx_lax.while_loop` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax2onnx.testing import Component, Testcase

from .control_flow import loop_state_static


def _ints(shape: tuple[Any, ...]) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, jnp.int32)


def while_loop_counter(x):
    return lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] + c[0].astype(c[1].dtype)), (0, x))[1]


def while_loop_vector(x):
    return lax.while_loop(lambda v: jnp.sum(v) < 50.0, lambda v: v * 1.5 + 1.0, jnp.abs(x))


def while_loop_pytree_carry(x, n):
    def body(c):
        return {"k": c["k"] + 1, "acc": c["acc"] + c["x"], "x": c["x"] * 0.5}

    out = lax.while_loop(lambda c: c["k"] < n, body, {"k": jnp.int32(0), "acc": jnp.zeros_like(x), "x": x})
    return out["acc"], out["k"]


def while_loop_flag_carry(x):
    # The condition is a carried flag: the body output doubles as the Loop's condition output.
    def body(c):
        v, _ = c
        v = v * 0.5
        return v, jnp.max(jnp.abs(v)) > 0.1

    return lax.while_loop(lambda c: c[1], body, (x, True))[0]


def while_loop_vmapped(x):
    # Under vmap each row stops at its own step: JAX ORs the predicates and selects in the body.
    def halve_until_small(v):
        return lax.while_loop(lambda u: jnp.sum(jnp.abs(u)) > 0.5, lambda u: u * 0.5, v)

    return jax.vmap(halve_until_small)(x)


def fori_loop_counter(x):
    return lax.fori_loop(0, 5, lambda i, v: v + i.astype(v.dtype), x)


def fori_loop_zero(x):
    return lax.fori_loop(0, 0, lambda i, v: v * 2.0 + 1.0, x)


def fori_loop_vector(x):
    return lax.fori_loop(0, 4, lambda i, v: v.at[i].set(v[i] * 2.0 + i), x)


def fori_loop_example(x):
    def body(i, carry):
        s, v = carry
        return s + jnp.sum(v), v * 0.9
    return lax.fori_loop(1, 6, body, (jnp.zeros((), x.dtype), x))


def fori_loop_traced_bounds(x, lo, hi):
    return lax.fori_loop(lo, hi, lambda i, v: v * 1.1 + i.astype(v.dtype), x)


components = [
    Component(
        name="lax.while_loop",
        onnx=["Loop"],
        since="v0.5.1",
        testcases=[
            Testcase("while_loop_counter", while_loop_counter, [("B", 3)], expected_ops=["Loop"]),
            Testcase("while_loop_vector", while_loop_vector, [("B",)], expected_ops=["Loop"]),
            Testcase("while_loop_pytree_carry", while_loop_pytree_carry, [(3, "B"), _ints(())], expected_ops=["Loop"],
                     check=lambda m, _variant: loop_state_static(m, [3, None])),
            Testcase("while_loop_flag_carry", while_loop_flag_carry, [("B", 2)], expected_ops=["Loop"]),
            Testcase("while_loop_vmapped", while_loop_vmapped, [("B", 3)], expected_ops=["Loop"]),
        ],
    ),
    Component(
        name="lax.fori_loop",
        onnx=["Loop"],
        since="v0.5.1",
        testcases=[
            Testcase("fori_loop_counter", fori_loop_counter, [("B", 2)], expected_ops=["Loop"]),
            Testcase("fori_loop_zero", fori_loop_zero, [("B", 2)]),
            Testcase("fori_loop_vector", fori_loop_vector, [(4,)], expected_ops=["Loop"]),
            Testcase("fori_loop_example", fori_loop_example, [("B", 3)], expected_ops=["Loop"]),
            Testcase("fori_loop_traced_bounds", fori_loop_traced_bounds, [(2, 3), _ints(()), _ints(())],
                     input_generator=lambda rng, shape, dt: rng.integers(-2, 6, shape) if dt.kind == "i"
                     else rng.standard_normal(shape),
                     expected_ops=["Loop"], forbidden_ops=["Less"], check=lambda m, _variant: loop_state_static(m, [2, 3])),
        ],
    ),
]

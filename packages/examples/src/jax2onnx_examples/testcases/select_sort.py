"""select_test and sort_test examples: jnp.select with data-dependent conditions, jnp.sort on slices."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.testing import Component, Testcase


def select_test(x: jax.Array, k: jax.Array, phi_0: jax.Array, select_conditions: jax.Array) -> jax.Array:
    """Pick ``sin(kx+φ)^(i+1)`` where ``select_conditions == i`` (i = 0, 1, 2), else 0."""
    base = jnp.sin(x * k + phi_0)
    return jnp.select(
        [select_conditions == i for i in range(3)],
        [base ** (i + 1) for i in range(3)],
        jnp.zeros_like(x),
    )


def _select_with(k: float, phi_0: float, conditions: object):
    def fn(x: jax.Array) -> jax.Array:
        return select_test(x, jnp.asarray(k, x.dtype), jnp.asarray(phi_0, x.dtype), jnp.asarray(conditions, jnp.int32))

    return fn


def _select_runtime_conditions(x: jax.Array, conditions: jax.Array) -> jax.Array:
    return select_test(x, jnp.asarray(2.0, x.dtype), jnp.asarray(0.5, x.dtype), conditions)


def _conditions_0_to_3(rng, shape, dtype):
    # Conditions 0..3 so every branch and the default are exercised; floats for x.
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 4, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def sort_test(x: jax.Array) -> jax.Array:
    """Sort the two halves of a length-10 vector independently and multiply them elementwise."""
    y1 = jnp.sort(x[5:])
    y2 = jnp.sort(x[:5])
    return y1 * y2


components = [
    Component(
        name="select_test",
        kind="example",
        description="select_test: Demonstrates jnp.select with a dynamic condition based on an input array.",
        onnx=["Equal", "Where", "Sin"],
        since="v0.6.1",
        testcases=[
            # conditions [0, 1, 2] pick a different power per element
            Testcase("select_test_all_options", callable=_select_with(2.0, 0.5, [0, 1, 2]), input_shapes=[(3,)],
                     expected_ops=["Where"]),
            Testcase("select_test_scalar_select_option_0", callable=_select_with(1.5, 0.3, 0), input_shapes=[("B",)]),
            Testcase("select_test_scalar_select_option_1", callable=_select_with(2.5, 0.8, 1), input_shapes=[("B",)]),
            Testcase("select_test_scalar_select_option_2", callable=_select_with(0.7, 1.2, 2), input_shapes=[("B",)]),
            # condition 3 matches no case: the default (zeros) is returned
            Testcase("select_test_default_case", callable=_select_with(1.0, 1.0, 3), input_shapes=[("B",)]),
            # conditions as a runtime int input, so the choice cannot be constant-folded away
            Testcase(
                "select_test_runtime_conditions",
                callable=_select_runtime_conditions,
                input_shapes=[("B", 4), jax.ShapeDtypeStruct(("B", 4), jnp.int32)],
                input_generator=_conditions_0_to_3,
                expected_ops=["Where"],
            ),
        ],
    ),
    Component(
        name="sort_test",
        kind="example",
        description="sort_test: Demonstrates jnp.sort on slices of an input array.",
        onnx=["Slice", "TopK", "Mul"],
        since="v0.6.1",
        testcases=[Testcase("sort_test_basic", callable=sort_test, input_shapes=[(10,)])],
    ),
]

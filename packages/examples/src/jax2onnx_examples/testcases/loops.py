"""ForiLoop example: a fixed-count fori_loop carrying a value and an integer counter."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax2onnx.testing import Component, Testcase


def fori_loop_counter(x: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Five steps of ``v ← v + 0.1·v²``; also returns the loop's own step counter."""

    def body(i: jax.Array, state: tuple[jax.Array, jax.Array]) -> tuple[jax.Array, jax.Array]:
        value, counter = state
        return value + 0.1 * value**2, counter + 1

    return jax.lax.fori_loop(0, 5, body, (x, jnp.asarray(0, jnp.int32)))


def _small_inputs(rng, shape, dtype):
    # |x| < 0.5 keeps five steps of v + 0.1 v² far from overflow, so float32 compares tightly.
    return rng.uniform(-0.5, 0.5, size=shape).astype(dtype)


components = [
    Component(
        name="ForiLoop",
        kind="example",
        description="fori_loop example",
        onnx=["Loop"],
        since="v0.5.1",
        testcases=[
            Testcase(
                "fori_loop_counter",
                callable=fori_loop_counter,
                input_shapes=[("B",)],
                input_generator=_small_inputs,
            ),
        ],
    )
]

"""A stand-in for a model library, for the tests of library-call lowerings (test_library_calls.py):
one jitted function with a static parameter, one jitted with a parameter passed as an operand, one
plain Python function. Nothing here knows jax2onnx."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


@functools.partial(jax.jit, static_argnames=("axis",))
def sum_of_squares(x, axis=-1):
    return jnp.sum(x * x, axis=axis)


@jax.jit
def scaled_sin(x, scale=2.0):
    return scale * jnp.sin(x)


def shifted_relu(x, shift=1.0):
    return jnp.maximum(x - shift, 0.0)


@jax.jit
def capped(x):
    """Elementwise, with a ``jnp.where`` whose body JAX batches differently under ``vmap``."""
    return jnp.where(x > 1.0, 1.0, x)

"""Small helpers shared by the example models (not a lowering module: no components here)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx


def module_list(items: Iterable[Any]) -> Any:
    """A list of sub-modules that both Flax versions accept as a module attribute.

    Flax 0.12 rejects a plain ``list`` holding modules (it wants ``nnx.List``); Flax 0.10 has no
    ``nnx.List`` and takes the plain list.
    """
    items = list(items)
    return nnx.List(items) if hasattr(nnx, "List") else items


def sinusoidal_embeddings(num_positions: int, num_hiddens: int) -> jax.Array:
    """Fixed sine/cosine position table of shape (1, num_positions, num_hiddens)."""
    position = jnp.arange(num_positions)[:, None]
    div_term = jnp.exp(jnp.arange(0, num_hiddens, 2) * -(jnp.log(10000.0) / num_hiddens))
    table = jnp.zeros((num_positions, num_hiddens))
    table = table.at[:, 0::2].set(jnp.sin(position * div_term))
    table = table.at[:, 1::2].set(jnp.cos(position * div_term))
    return table[None, :, :]


def small_normal_init(key: jax.Array, shape: tuple[int, ...], dtype: Any = jnp.float32) -> jax.Array:
    """Plain normal * 0.1: keeps deep example models' activations in a range where float32 compares well."""
    return jax.random.normal(key, shape, dtype) * 0.1


def gelu_exact(x: jax.Array) -> jax.Array:
    return nnx.gelu(x, approximate=False)


def apply_layers(layers: Iterable[Callable[..., Any]], x: jax.Array, deterministic: Any = True) -> jax.Array:
    """Run ``layers`` in order; dropout layers get ``deterministic`` (a bool or a runtime input)."""
    for layer in layers:
        x = layer(x, deterministic=deterministic) if isinstance(layer, nnx.Dropout) else layer(x)
    return x

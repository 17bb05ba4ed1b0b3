"""Testcases of :mod:`jax2onnx_lax.stacking` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax2onnx.testing import Component, Testcase


def _stack_pairs(a, b):
    return jax.vmap(lambda u, v: jnp.stack([u, v, u * v], axis=1))(a, b)


def _stack_grad(a, b):
    return jax.grad(lambda u, v: jnp.sum(jnp.sin(jnp.stack([u, v], axis=1))), argnums=(0, 1))(a, b)


def _tile_rows(a):
    return jax.vmap(lambda u: jnp.tile(u, (2, 3)))(a)


components = [
    Component(
        name="lax.stack",
        onnx=["Unsqueeze", "Concat"],
        since="v0.1.0",
        description="jnp.stack under vmap (JAX >= 0.7 emits a stack primitive)",
        testcases=[
            Testcase("stack_vmap_axis1", _stack_pairs, [("B", 4, 3), ("B", 4, 3)]),
            Testcase("stack_grad_unstack", _stack_grad, [("B", 3), ("B", 3)]),
        ],
    ),
    Component(
        name="lax.tile",
        onnx=["Tile"],
        since="v0.1.0",
        description="jnp.tile under vmap (JAX >= 0.7 emits a tile primitive)",
        testcases=[
            Testcase("tile_vmap_rows", _tile_rows, [("B", 2, 3)]),
            Testcase("tile_vmap_int", _tile_rows, [jax.ShapeDtypeStruct(("B", 2, 3), jnp.int32)]),
        ],
    ),
]

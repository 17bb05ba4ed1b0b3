"""lax ``stack``/``unstack`` and ``tile``: primitives newer JAX (>= 0.7) emits for jnp.stack and jnp.tile
under vmap, and for their gradients."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import complex_pairs as cp

lowerings = Lowerings()


@lowerings.register("stack", complex=cp.unsupported)
def lower_stack(ctx, *xs):
    """Each operand gains the new axis (Unsqueeze), then one Concat joins them along it."""
    axis = int(ctx.params["axis"])
    parts = [ctx.op.Unsqueeze(x, ctx.i64([axis])) for x in xs]
    return parts[0] if len(parts) == 1 else ctx.op.Concat(*parts, axis=axis)


@lowerings.register("unstack", complex=cp.unsupported)
def lower_unstack(ctx, x):
    """The transpose of stack (what grad produces): one Split along the axis, then Squeeze each."""
    axis = int(ctx.params["axis"])
    n = len(ctx.avals_out)
    parts = [x] if n == 1 else list(ctx.op.Split(x, ctx.i64([1] * n), axis=axis, _outputs=n))
    return [ctx.op.Squeeze(p, ctx.i64([axis])) for p in parts]


@lowerings.register("tile", complex=cp.unsupported)
def lower_tile(ctx, x):
    """One Tile; the repeats may be symbolic (computed in the graph)."""
    return ctx.op.Tile(x, ctx.shape_tensor(list(ctx.params["reps"])))


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

"""lax ``stack``/``unstack`` and ``tile``: primitives newer JAX (>= 0.7) emits for jnp.stack and jnp.tile
under vmap, and for their gradients."""

from __future__ import annotations

from jax2onnx.plugin import Lowerings

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

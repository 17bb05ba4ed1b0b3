"""Shape functions. ``jnp.tile`` → Tile (repeats may be symbolic), ``jnp.stack`` → Unsqueeze +
Concat, ``jnp.repeat`` with static repeats along a static axis → one Gather with constant indices.

``reshape``, ``squeeze``, ``transpose``, ``concatenate``, ``split``, ``flip`` and ``jnp.shape``
map to single lax primitives (or static slices) already: they are documented and tested here and
lowered by the lax pack (Reshape, Squeeze, Transpose, Concat, Split, Slice, Shape). ``roll`` has
its own module (roll.py).
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax2onnx.plugin import Lowerings, is_array, is_symbolic_dim

from ._common import is_static_int, mark, mark_name, patches_for

lowerings = Lowerings()


# ---------------------------------------------------------------------------------------------
# tile


def _static_reps(reps):
    """``reps`` as a tuple of non-negative ints / symbolic dims; None if it depends on data."""
    if is_static_int(reps) or is_symbolic_dim(reps):
        reps = (reps,)
    elif isinstance(reps, (jax.Array, np.ndarray)):
        try:
            reps = tuple(int(r) for r in np.asarray(reps).reshape(-1))  # concrete (not traced) arrays
        except Exception:  # noqa: BLE001 - a tracer: data-dependent repeats
            return None
    if not isinstance(reps, (tuple, list)):
        return None
    out = []
    for r in reps:
        if is_static_int(r) and r >= 0:
            out.append(int(r))
        elif is_symbolic_dim(r):
            out.append(r)
        else:
            return None
    return tuple(out)


def _tile_region(original, a, *, reps):
    return original(a, reps)


def _make_tile(name, original):
    region = functools.partial(_tile_region, original)

    @functools.wraps(original)
    def tile(A, reps):
        r = _static_reps(reps) if is_array(A) else None
        if r is not None:
            return mark("tile", region, A, reps=r)
        return original(A, reps)

    return tile


@lowerings.register_call(mark_name("tile"))
def lower_tile(ctx, x):
    reps = list(ctx.marked.params["reps"])
    ndim = len(ctx.avals_in[0].shape)
    if len(reps) < ndim:  # numpy: missing repeats are 1 for the leading axes
        reps = [1] * (ndim - len(reps)) + reps
    elif len(reps) > ndim:  # ... and missing axes are new leading axes of size 1
        x = ctx.op.Unsqueeze(x, ctx.i64(range(len(reps) - ndim)))
    return ctx.op.Tile(x, ctx.shape_tensor(reps))


# ---------------------------------------------------------------------------------------------
# stack


def _stack_region(original, *arrays, axis):
    return original(arrays, axis=axis)


def _make_stack(name, original):
    region = functools.partial(_stack_region, original)

    @functools.wraps(original)
    def stack(arrays, axis=0, out=None, dtype=None):
        if (
            isinstance(arrays, (list, tuple))
            and arrays
            and all(is_array(a) for a in arrays)
            and is_static_int(axis)
            and out is None
            and dtype is None
            and -np.ndim(arrays[0]) - 1 <= axis <= np.ndim(arrays[0])
        ):
            return mark("stack", region, *arrays, axis=int(axis) % (np.ndim(arrays[0]) + 1))
        return original(arrays, axis, out, dtype)

    return stack


@lowerings.register_call(mark_name("stack"))
def lower_stack(ctx, *xs):
    axis = ctx.marked.params["axis"]
    dtype = ctx.avals_out[0].dtype
    parts = [ctx.op.Unsqueeze(ctx.cast(x, dtype), ctx.i64([axis])) for x in xs]
    return ctx.op.Concat(*parts, axis=axis)


# ---------------------------------------------------------------------------------------------
# repeat


def _repeat_region(original, a, *, repeats, axis):
    return original(a, np.asarray(repeats) if isinstance(repeats, tuple) else repeats, axis=axis)


def _make_repeat(name, original):
    region = functools.partial(_repeat_region, original)

    @functools.wraps(original)
    def repeat(a, repeats, axis=None, **kwargs):
        r = _static_reps(repeats)
        if (
            is_array(a)
            and np.ndim(a) >= 1
            and r is not None
            and all(is_static_int(v) for v in r)
            and (axis is None or is_static_int(axis))
            and not kwargs
        ):
            ax = None if axis is None else int(axis) % np.ndim(a)
            size = np.prod(np.shape(a)) if ax is None else np.shape(a)[ax]  # symbolic: not an int
            if is_static_int(size) and len(r) in (1, int(size)):
                return mark("repeat", region, a, repeats=r[0] if len(r) == 1 else r, axis=ax)
        return original(a, repeats, axis, **kwargs)

    return repeat


@lowerings.register_call(mark_name("repeat"))
def lower_repeat(ctx, x):
    p = ctx.marked.params
    axis = p["axis"]
    shape = ctx.avals_in[0].shape
    if axis is None:
        x = ctx.op.Reshape(x, ctx.i64([-1]))
        size, axis = int(np.prod(shape)), 0
    else:
        size = int(shape[axis])
    indices = np.repeat(np.arange(size, dtype=np.int64), np.asarray(p["repeats"], dtype=np.int64))
    return ctx.op.Gather(x, ctx.const(indices), axis=axis)


patches = (
    patches_for("jax.numpy", ["tile"], _make_tile)
    + patches_for("jax.numpy", ["stack"], _make_stack)
    + patches_for("jax.numpy", ["repeat"], _make_repeat)
)

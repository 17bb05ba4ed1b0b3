"""Shape functions. ``jnp.repeat`` with a static scalar count along a static axis → one Gather with
constant indices (JAX's form is a broadcast and a reshape).

``jnp.tile`` and ``jnp.stack`` are the lax ``tile``/``stack`` primitives in JAX >= 0.7 (Tile;
Unsqueeze + Concat, from the lax pack); on older JAX ``stack`` is the same Unsqueeze + Concat from
broadcasts and a concatenation, and ``tile`` a reshape-broadcast-reshape this module recognizes as
one Tile.
``reshape``, ``squeeze``, ``transpose``, ``concatenate``, ``split``, ``flip`` and ``jnp.shape``
map to single lax primitives (or static slices) already: they are documented and tested here and
lowered by the lax pack (Reshape, Squeeze, Transpose, Concat, Split, Slice, Shape). ``roll`` has
its own module (roll.py).

``jnp.repeat`` is plain Python: found in the trace with nothing patched (:mod:`._library`), its
region is the equations one call emits; the axis is the one whose size grew (numpy's ``axis=None``
when the result is the flattened array), the count the growth.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.plugin import Lowerings

from ._common import is_static_int
from ._library import literal_value

lowerings = Lowerings()


# ---------------------------------------------------------------------------------------------
# tile (JAX < 0.7: plain reshapes and a broadcast)


def recognize_tile(site):
    """``tile(A, reps)`` on JAX < 0.7, whose ``jnp.tile`` is a reshape, a broadcast and a reshape:
    each repeat is the output's size over the input's along that axis (the input's shape padded
    with leading 1s). Newer JAX traces the lax ``tile`` primitive, which the lax pack lowers."""
    if site.eqns("tile") or len(site.operands) != 1 or literal_value(site, 0) is not None:
        return None
    if len(site.avals_out) != 1:
        return None
    shape, out = tuple(site.avals_in[0].shape), tuple(site.avals_out[0].shape)
    if len(out) < len(shape):
        return None
    padded = (1,) * (len(out) - len(shape)) + shape
    reps = []
    for d, e in zip(padded, out, strict=True):
        if is_static_int(d) and is_static_int(e):
            if d == 0 or e % d:
                return None
            reps.append(int(e) // int(d))
        else:
            try:
                r = e // d
            except Exception:  # noqa: BLE001 - symbolic sizes that do not divide
                return None
            if str(r * d) != str(e):
                return None
            reps.append(r)
    return {"reps": tuple(reps)}


@lowerings.register_library("jax.numpy.tile", recognize=recognize_tile)
def lower_tile(ctx, x):
    reps = list(ctx.marked.params["reps"])
    ndim = len(ctx.avals_in[0].shape)
    if len(reps) > ndim:  # numpy: missing axes are new leading axes of size 1
        x = ctx.op.Unsqueeze(x, ctx.i64(range(len(reps) - ndim)))
    return ctx.op.Tile(x, ctx.shape_tensor(reps))


# ---------------------------------------------------------------------------------------------
# repeat


def recognize_repeat(site):
    """``repeat(a, repeats, axis)`` with a scalar count (per-element counts are a constant array
    operand: declined to the body). Sizes must be static along the repeated axis."""
    if len(site.operands) != 1 or literal_value(site, 0) is not None or len(site.avals_out) != 1:
        return None
    shape, out = tuple(site.avals_in[0].shape), tuple(site.avals_out[0].shape)
    if not shape:
        return None
    if len(out) == 1 and len(shape) != 1:
        axis, size, grown = None, (int(np.prod(shape)) if all(is_static_int(d) for d in shape) else None), out[0]
    elif len(out) == len(shape):
        changed = [i for i, (d, e) in enumerate(zip(shape, out, strict=True)) if str(d) != str(e)]
        if len(changed) != 1:
            return None
        axis = changed[0]
        size, grown = shape[axis], out[axis]
    else:
        return None
    if not is_static_int(size) or not is_static_int(grown) or size == 0 or grown % size:
        return None
    return {"repeats": int(grown) // int(size), "axis": axis}


@lowerings.register_library("jax.numpy.repeat", recognize=recognize_repeat)
def lower_repeat(ctx, x):
    p = ctx.marked.params
    axis = p["axis"]
    shape = ctx.avals_in[0].shape
    if axis is None:
        x = ctx.op.Reshape(x, ctx.i64([-1]))
        size, axis = int(np.prod(shape)), 0
    else:
        size = int(shape[axis])
    indices = np.repeat(np.arange(size, dtype=np.int64), int(p["repeats"]))
    return ctx.op.Gather(x, ctx.const(indices), axis=axis)

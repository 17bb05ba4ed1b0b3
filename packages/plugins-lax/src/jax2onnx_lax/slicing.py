"""lax slicing lowerings: slice, dynamic_slice, dynamic_update_slice, rev, pad.

Traced start indices are clamped the way XLA clamps them (into ``[0, dim - size]``), so a slice
or an update never leaves the operand and the numbers match JAX for any index value.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.fusion import const_array
from jax2onnx.plugin import Lowerings

from . import complex_pairs as cp
from .shape_helpers import INT64_MAX, INT64_MIN, clamp_starts, is_static, reshape, same_dim

lowerings = Lowerings()


@lowerings.register("slice")
def lower_slice(ctx, x):
    shape = ctx.avals_in[0].shape
    starts_p = ctx.params["start_indices"]
    limits_p = ctx.params["limit_indices"]
    strides_p = ctx.params.get("strides") or (1,) * len(shape)
    axes, starts, ends, steps = [], [], [], []
    for a, (s, lim, st, d) in enumerate(zip(starts_p, limits_p, strides_p, shape, strict=True)):
        full_end = same_dim(lim, d)
        if is_static(s) and int(s) == 0 and int(st) == 1 and full_end:
            continue
        axes.append(a)
        starts.append(s)
        ends.append(INT64_MAX if full_end else lim)
        steps.append(int(st))
    if not axes:
        return x
    step_v = ctx.i64(steps) if any(st != 1 for st in steps) else None
    return ctx.op.Slice(x, ctx.shape_tensor(starts), ctx.shape_tensor(ends), ctx.i64(axes), step_v)


def _start_vector(ctx, scalars) -> object:
    """Rank-0 index operands -> one int64 vector (a single Concat, a single Cast)."""
    parts = [ctx.op.Unsqueeze(s, ctx.i64([0])) for s in scalars]
    vec = parts[0] if len(parts) == 1 else ctx.op.Concat(*parts, axis=0)
    return ctx.cast(vec, np.int64)


def _window(ctx, sizes, indices):
    """(axes, starts, ends) of the window of ``sizes`` at the clamped ``indices`` into the first
    operand, over the axes it does not cover whole (one at its full size always starts at 0 once
    clamped: nothing to do there); None when it covers every axis."""
    shape = ctx.avals_in[0].shape
    axes = [a for a in range(len(shape)) if not same_dim(sizes[a], shape[a])]
    if not axes:
        return None
    starts = _start_vector(ctx, [indices[a] for a in axes])
    starts = clamp_starts(ctx, starts, [shape[a] - sizes[a] for a in axes])
    return axes, starts, ctx.op.Add(starts, ctx.shape_tensor([sizes[a] for a in axes]))


@lowerings.register("dynamic_slice")
def lower_dynamic_slice(ctx, x, *indices):
    window = _window(ctx, ctx.params["slice_sizes"], indices)
    if window is None:
        return x
    axes, starts, ends = window
    return ctx.op.Slice(x, starts, ends, ctx.i64(axes))


@lowerings.register("dynamic_update_slice")
def lower_dynamic_update_slice(ctx, x, update, *indices):
    """Rebuild each updated axis as ``Concat(before, middle, after)``; ``middle`` is the update
    (innermost axis) or the same construction one axis further in. Exact, and no index grids."""
    window = _window(ctx, ctx.avals_in[1].shape, indices)
    if window is None:
        return update
    axes, starts, ends = window
    starts_1, ends_1 = _per_axis(ctx, starts, len(axes)), _per_axis(ctx, ends, len(axes))

    def rebuild(piece, i):
        if i == len(axes):
            return update
        ax = ctx.i64([axes[i]])
        before = ctx.op.Slice(piece, ctx.i64([0]), starts_1[i], ax)
        after = ctx.op.Slice(piece, ends_1[i], ctx.i64([INT64_MAX]), ax)
        middle = rebuild(ctx.op.Slice(piece, starts_1[i], ends_1[i], ax), i + 1) if i + 1 < len(axes) else update
        return ctx.op.Concat(before, middle, after, axis=axes[i])

    return rebuild(x, 0)


def _per_axis(ctx, vec, k):
    """Split a length-k int64 vector into k length-1 vectors (Slice bounds)."""
    if k == 1:
        return [vec]
    return list(ctx.op.Split(vec, axis=0, num_outputs=k, _outputs=k))


@lowerings.register("rev")
def lower_rev(ctx, x):
    """ONNX has no reverse op: a Slice with step -1 from the last element past the first."""
    dims = sorted(ctx.params["dimensions"])
    if not dims:
        return x
    k = len(dims)
    return ctx.op.Slice(x, ctx.i64([-1] * k), ctx.i64([INT64_MIN] * k), ctx.i64(dims), ctx.i64([-1] * k))


def lower_pad_complex(ctx, x, value):
    """Pairs padded as one tensor with an untouched trailing axis when the fill's two parts are one
    constant (0 + 0i, what jnp.pad and rfft's zero padding use); otherwise each part on its own."""
    config = [tuple(c) for c in ctx.params["padding_config"]]
    shape = list(ctx.avals_in[0].shape)
    pair_config, pair_shape = [*config, (0, 0, 0)], cp.pair_shape(shape)
    fill = const_array(value)
    if fill is not None and fill.shape == (2,) and fill[0] == fill[1]:
        return _pad(ctx, x, ctx.const(fill[0]), pair_config, pair_shape)
    re = _pad(ctx, cp.real_part(ctx, x), cp.real_part(ctx, value), config, list(shape))
    im = _pad(ctx, cp.imag_part(ctx, x), cp.imag_part(ctx, value), config, list(shape))
    return cp.from_parts(ctx, re, im)


@lowerings.register("pad", complex=lower_pad_complex)
def lower_pad(ctx, x, value):
    """Interior padding first (per axis: add a unit axis, Pad it with ``interior`` values, merge,
    drop the trailing fill), then negative low/high padding as a crop (Slice), then one Pad."""
    return _pad(ctx, x, value, [tuple(c) for c in ctx.params["padding_config"]], list(ctx.avals_in[0].shape))


def _pad(ctx, x, value, config, shape):
    for axis, (_, _, interior) in enumerate(config):
        if interior == 0 or (is_static(shape[axis]) and int(shape[axis]) <= 1):
            continue
        x, shape = _interior_pad(ctx, x, value, shape, axis, int(interior))
    crop = [(a, max(-lo, 0), hi) for a, (lo, hi, _) in enumerate(config) if lo < 0 or hi < 0]
    if crop:
        axes = [a for a, _, _ in crop]
        starts = [s for _, s, _ in crop]
        ends = [hi if hi < 0 else INT64_MAX for _, _, hi in crop]
        x = ctx.op.Slice(x, ctx.i64(starts), ctx.i64(ends), ctx.i64(axes))
    lows = [max(int(lo), 0) for lo, _, _ in config]
    highs = [max(int(hi), 0) for _, hi, _ in config]
    if any(lows) or any(highs):
        x = ctx.op.Pad(x, ctx.i64(lows + highs), value)
    return x


def _interior_pad(ctx, x, value, shape, axis, interior):
    rank = len(shape)
    y = ctx.op.Unsqueeze(x, ctx.i64([axis + 1]))
    pads = [0] * (2 * (rank + 1))
    pads[rank + 1 + axis + 1] = interior
    y = ctx.op.Pad(y, ctx.i64(pads), value)
    unit_shape = shape[: axis + 1] + [1 + interior] + shape[axis + 1 :]
    merged = shape[:axis] + [shape[axis] * (1 + interior)] + shape[axis + 1 :]
    y = reshape(ctx, y, unit_shape, merged)
    y = ctx.op.Slice(y, ctx.i64([0]), ctx.i64([-interior]), ctx.i64([axis]))
    out_shape = shape[:axis] + [shape[axis] + (shape[axis] - 1) * interior] + shape[axis + 1 :]
    return y, out_shape

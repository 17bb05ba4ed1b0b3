"""lax slicing lowerings: slice, dynamic_slice, dynamic_update_slice, rev, pad.

Traced start indices are clamped the way XLA clamps them (into ``[0, dim - size]``), so a slice
or an update never leaves the operand and the numbers match JAX for any index value.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import _numeric as nm
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


@lowerings.register("dynamic_slice")
def lower_dynamic_slice(ctx, x, *indices):
    shape = ctx.avals_in[0].shape
    sizes = ctx.params["slice_sizes"]
    # An axis sliced at its full size always starts at 0 once clamped: nothing to do there.
    axes = [a for a in range(len(shape)) if not same_dim(sizes[a], shape[a])]
    if not axes:
        return x
    starts = _start_vector(ctx, [indices[a] for a in axes])
    starts = clamp_starts(ctx, starts, [shape[a] - sizes[a] for a in axes])
    ends = ctx.op.Add(starts, ctx.shape_tensor([sizes[a] for a in axes]))
    return ctx.op.Slice(x, starts, ends, ctx.i64(axes))


@lowerings.register("dynamic_update_slice")
def lower_dynamic_update_slice(ctx, x, update, *indices):
    """Rebuild each updated axis as ``Concat(before, middle, after)``; ``middle`` is the update
    (innermost axis) or the same construction one axis further in. Exact, and no index grids."""
    shape = ctx.avals_in[0].shape
    usize = ctx.avals_in[1].shape
    axes = [a for a in range(len(shape)) if not same_dim(usize[a], shape[a])]
    if not axes:
        return update
    starts = _start_vector(ctx, [indices[a] for a in axes])
    starts = clamp_starts(ctx, starts, [shape[a] - usize[a] for a in axes])
    ends = ctx.op.Add(starts, ctx.shape_tensor([usize[a] for a in axes]))
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
    fill = nm.const_value(value)
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


# ---------------------------------------------------------------------------------------------
# Testcases


def _idx(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


def _like(value, i):
    """A constant index of the traced index's dtype (lax wants all indices of one type)."""
    return jnp.asarray(value, dtype=i.dtype)


def _dynamic_slice(x, *starts, sizes):
    return lax.dynamic_slice_p.bind(x, *starts, slice_sizes=tuple(sizes))


def _dynamic_update_slice(x, update, *starts):
    return lax.dynamic_update_slice_p.bind(x, update, *starts)


def _some_out_of_range(rng, shape, dtype):
    """Indices from -3 to 9: the lowering must clamp them exactly as XLA does."""
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-3, 10, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


components = [
    Component(
        name="lax.slice",
        onnx=["Slice"],
        since="v0.1.0",
        testcases=[
            Testcase("slice_test1", lambda x: lax.slice(x, (1, 1), (3, 3)), [(4, 4)], expected_ops=["Slice"]),
            Testcase("slice_3d_none_strides", lambda x: lax.slice(x, (0, 1, 0), (2, 3, 4)), [(2, 3, 4)],
                     expected_ops=["Slice"]),
            Testcase("slice_strided", lambda x: lax.slice(x, (0, 1), (x.shape[0], 6), (1, 2)), [("B", 7)],
                     expected_ops=["Slice"]),
            # Limits that are symbolic expressions (B - 1) are computed from the input's shape.
            Testcase("slice_symbolic_limit", lambda x: lax.slice(x, (0, 1), (x.shape[0] - 1, 3)), [("B", 3)],
                     expected_ops=["Slice"], static_sizes={"B": 4}),
        ],
    ),
    Component(
        name="lax.rev",
        onnx=["Slice"],
        since="v0.7.0",
        testcases=[
            Testcase("rev_axis0", lambda x: lax.rev(x, (0,)), [("B", 3)], expected_ops=["Slice"]),
            Testcase("rev_two_axes", lambda x: lax.rev(x, (0, 2)), [(2, "B", 4)], expected_ops=["Slice"]),
        ],
    ),
    Component(
        name="lax.pad",
        onnx=["Pad", "Slice", "Reshape"],
        since="v0.7.0",
        testcases=[
            Testcase("pad_low_high", lambda x: lax.pad(x, jnp.asarray(0, x.dtype), ((1, 2, 0), (0, 1, 0))), [("B", 3)],
                     expected_ops=["Pad"]),
            Testcase("pad_value_operand", lambda x, v: lax.pad(x, v, ((2, 0, 0), (1, 1, 0))), [("B", 3), ()],
                     expected_ops=["Pad"]),
            Testcase("pad_negative_crops", lambda x: lax.pad(x, jnp.asarray(0, x.dtype), ((-1, 2, 0), (1, -2, 0))),
                     [("B", 4)], expected_ops=["Slice", "Pad"], static_sizes={"B": 4}),
            Testcase("pad_interior", lambda x, v: lax.pad(x, v, ((0, 0, 2), (1, 0, 1))), [("B", 3), ()],
                     expected_ops=["Pad", "Reshape"]),
            Testcase("pad_interior_and_negative", lambda x, v: lax.pad(x, v, ((-2, -1, 1),)), [(4,), ()],
                     expected_ops=["Pad", "Slice"]),
            Testcase("pad_int32", lambda x: lax.pad(x, jnp.asarray(7, x.dtype), ((1, 1, 1),)), [_idx("B")],
                     expected_ops=["Pad"]),
        ],
    ),
    Component(
        name="lax.dynamic_slice",
        onnx=["Slice"],
        since="v0.1.0",
        testcases=[
            # The primitive itself (lax.dynamic_slice first wraps negative indices): starts from -3 to 9
            # must be clamped into [0, dim - size].
            Testcase("dynamic_slice_test1", lambda x, i: _dynamic_slice(x, i, sizes=(2,)), [(5,), _idx()],
                     input_generator=_some_out_of_range, expected_ops=["Slice"]),
            Testcase("dynamic_slice_2d", lambda x, i, j: _dynamic_slice(x, i, j, sizes=(2, 2)),
                     [(4, 5), _idx(), _idx()], input_generator=_some_out_of_range, expected_ops=["Slice"]),
            Testcase("dynamic_slice_3d", lambda x, i: _dynamic_slice(x, _like(1, i), i, _like(0, i), sizes=(1, 2, 3)),
                     [(3, 4, 3), _idx()], input_generator=_some_out_of_range, expected_ops=["Slice"]),
            # ViT-style: a batch of token sequences, take a window of tokens from a traced position.
            Testcase("dynamic_slice_vit_like",
                     lambda x, i: _dynamic_slice(x, _like(0, i), i, _like(0, i), sizes=(x.shape[0], 2, 4)),
                     [("B", 5, 4), _idx()], input_generator=_some_out_of_range, expected_ops=["Slice"]),
            # The slice size along the batch axis is itself symbolic (B - 1).
            Testcase("dynamic_slice_vit_like_dynamic",
                     lambda x, i: _dynamic_slice(x, i, _like(1, i), _like(0, i), sizes=(x.shape[0] - 1, 3, 4)),
                     [("B", 5, 4), _idx()], input_generator=_some_out_of_range, expected_ops=["Slice"],
                     run_static=False),
            # The sliced axis is the symbolic one: the clamp bound B - 1 is computed in the graph.
            Testcase("dynamic_slice_symbolic_axis", lambda x, i: _dynamic_slice(x, i, _like(0, i), sizes=(1, 3)),
                     [("B", 3), _idx()], input_generator=_some_out_of_range, expected_ops=["Slice", "Shape"],
                     run_static=False),
            # Through the public API (negative indices wrap first, then clamp).
            Testcase("dynamic_slice_api", lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, axis=1), [("B", 6), _idx()],
                     input_generator=_some_out_of_range, expected_ops=["Slice"]),
        ],
    ),
    Component(
        name="lax.dynamic_update_slice",
        onnx=["Slice", "Concat"],
        since="v0.7.0",
        testcases=[
            Testcase("dus_1d", lambda x, u, i: _dynamic_update_slice(x, u, i), [(6,), (2,), _idx()],
                     input_generator=_some_out_of_range, expected_ops=["Concat"]),
            Testcase("dus_2d_block", lambda x, u, i, j: _dynamic_update_slice(x, u, i, j),
                     [(4, 5), (2, 3), _idx(), _idx()], input_generator=_some_out_of_range, expected_ops=["Concat"]),
            # A row update in a batch of states (the x.at[i].set(row) pattern).
            Testcase("dus_batch_rows", lambda x, u, i: _dynamic_update_slice(x, u, i, _like(0, i)),
                     [("B", 3), (1, 3), _idx()], input_generator=_some_out_of_range, expected_ops=["Concat"]),
            Testcase("dus_symbolic_axis_kept", lambda x, u, i: _dynamic_update_slice(x, u, _like(0, i), i, _like(0, i)),
                     [("B", 5, 2), ("B", 2, 2), _idx()], input_generator=_some_out_of_range, expected_ops=["Concat"]),
            Testcase("dus_full_update", lambda x, u, i: _dynamic_update_slice(x, u, i), [(3,), (3,), _idx()],
                     input_generator=_some_out_of_range),
            Testcase("dus_api", lambda x, u, i: lax.dynamic_update_slice_in_dim(x, u, i, axis=0),
                     [("B", 2), (1, 2), _idx()], input_generator=_some_out_of_range, expected_ops=["Concat"],
                     static_sizes={"B": 4}),
        ],
    ),
]

"""lax gather -> ONNX Slice / Gather / GatherElements / GatherND.

How a ``GatherDimensionNumbers`` maps to ONNX:

- indices without batch dims (``x[1:]`` with a symbolic size, ``x[i, 2:4]``): one dynamic Slice;
- one indexed axis, no batching dims (``x[idx]``, ``x[:, idx]``, ``jnp.take``): Gather on that axis;
  a window along it (vmap of a dynamic slice) adds ``arange(size)`` to the index;
- one indexed axis and every other operand axis a batching dim (``jnp.take_along_axis``):
  GatherElements;
- anything else: GatherND with ``batch_dims`` for the batching dims, windows along indexed axes
  expanded into extra index axes, then Squeeze/Transpose into JAX's output order.

Start indices are clamped into ``[0, dim - slice_size]`` as XLA does for CLIP and
PROMISE_IN_BOUNDS (onnxruntime rejects out-of-range indices, XLA clamps them); FILL_OR_DROP
replaces every window whose start was out of range with the fill value (NaN for floats by default).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from jax2onnx.plugin import Lowerings

from . import complex_pairs as cp
from .shape_helpers import clamp_starts, is_static, mode_name, same_dim, transpose

lowerings = Lowerings()


def fill_value_for(dtype, fill_value) -> np.ndarray:
    """JAX's default fill for FILL_OR_DROP gathers: NaN for inexact types, the minimum of signed
    ints, the maximum of unsigned ints, True for bools."""
    dtype = np.dtype(dtype)
    if fill_value is None:
        if dtype.kind in "fc":
            fill_value = np.nan
        elif dtype.kind == "i":
            fill_value = np.iinfo(dtype).min
        elif dtype.kind == "u":
            fill_value = np.iinfo(dtype).max
        else:
            fill_value = True
    return np.asarray(fill_value, dtype=dtype)


def all_in_bounds(ctx, raw, clamped, k: int, keepdims: bool = False):
    """Bool over the index batch dims: every start of the window was already in range. ``k`` is
    the length of the index-vector axis (0: the indices have none); ``keepdims`` keeps that axis."""
    eq = ctx.op.Equal(raw, clamped)
    if k == 0 or (k == 1 and keepdims):
        return eq
    if k == 1:
        return ctx.op.Squeeze(eq, ctx.i64([-1]))
    reduced = ctx.op.ReduceMin(ctx.cast(eq, np.int32), ctx.i64([-1]), keepdims=int(keepdims))  # no bool Reduce
    return ctx.cast(reduced, np.bool_)


def _without_index_axis(ctx, indices):
    """``indices[..., 0]`` for an index-vector axis of length 1. jnp usually made that axis just
    before the gather (an Unsqueeze or a Reshape that appends it): reuse that node's input then."""
    node = indices.producer()
    if node is not None and node.op_type in ("Unsqueeze", "Reshape") and node.inputs[0] is not None:
        src, out = node.inputs[0].shape, indices.shape
        if src is not None and out is not None and len(out) == len(src) + 1 and str(out[-1]) == "1":
            if [str(d) for d in src] == [str(d) for d in list(out)[:-1]]:
                return node.inputs[0]
    return ctx.op.Squeeze(indices, ctx.i64([-1]))


def arange(ctx, n):
    """int64 ``[0, 1, ..., n-1]`` (constant when ``n`` is static)."""
    if is_static(n):
        return ctx.const(np.arange(int(n), dtype=np.int64))
    return ctx.op.Range(ctx.i64(0), ctx.dim_scalar(n), ctx.i64(1))


def window_offsets(ctx, sizes, columns, depth):
    """An int64 tensor of shape ``(*sizes, depth)`` whose column ``columns[j]`` counts along axis j
    (``None``: axis j has no column) and whose other entries are 0. Added to start indices it
    enumerates every position of the windows."""
    n = len(sizes)
    if all(is_static(s) for s in sizes):
        offs = np.zeros([int(s) for s in sizes] + [depth], dtype=np.int64)
        for j, col in enumerate(columns):
            if col is None:
                continue
            shape = [1] * n
            shape[j] = int(sizes[j])
            offs[..., col] += np.arange(int(sizes[j]), dtype=np.int64).reshape(shape)
        return ctx.const(offs)
    total = ctx.const(np.zeros([1] * n + [depth], dtype=np.int64))
    for j, col in enumerate(columns):
        a = ctx.op.Unsqueeze(arange(ctx, sizes[j]), ctx.i64([i for i in range(n + 1) if i != j]))
        if col is None:  # still broadcast the result along axis j
            total = ctx.op.Add(total, ctx.op.Mul(a, 0))
            continue
        onehot = np.zeros(depth, dtype=np.int64)
        onehot[col] = 1
        total = ctx.op.Add(total, ctx.op.Mul(a, ctx.const(onehot)))
    return total


@dataclasses.dataclass(frozen=True)
class GatherPlan:
    """The axis arithmetic of one gather, from its params and avals alone (no ONNX): which ONNX form
    it takes, which operand axes take traced starts, and how the raw result of that form is
    squeezed and transposed into JAX's output order.

    Axes of a raw result are labelled ``("o", operand axis)`` or ``("b", index batch axis)``.
    """

    path: str  # "slice" | "gather" | "elements" | "nd"
    op_shape: tuple  # operand dims; a complex operand gets its (real, imag) axis appended
    sizes: tuple  # slice sizes, likewise
    start_map: tuple[int, ...]
    keep: tuple[int, ...]  # positions in start_map whose axis is sliced narrower than its dim
    indexed: tuple[int, ...]  # operand axes that take a traced start
    collapsed: frozenset[int]
    rest: tuple[int, ...]  # operand axes neither batching nor indexed
    partial: tuple[int, ...]  # axes of ``rest`` sliced narrower than their dim: they start at 0
    flat: bool  # Gather/GatherElements take one index per element: the index-vector axis goes first
    nb: int  # batch rank of the indices
    fill: bool  # FILL_OR_DROP: windows that started out of range become the fill value
    labels: tuple[tuple[str, int], ...]  # axes of the raw result
    squeeze: tuple[int, ...]  # raw-result positions of collapsed axes
    perm: tuple[int, ...]  # then the transpose into JAX's order
    mask_axes: tuple[int, ...]  # the offset dims, where the fill mask gets unit axes
    elements_order: tuple[int, ...] = ()  # "elements": index batch axis laid along each operand axis
    nd_batch: int = 0  # "nd": GatherND's batch_dims
    nd_data_perm: tuple[int, ...] = ()  # "nd": batching dims, indexed axes, the rest
    nd_idx_perm: tuple[int, ...] = ()  # "nd": index batch axes paired with them first
    nd_windowed: tuple[int, ...] = ()  # "nd": positions in ``indexed`` with a window (index axes)

    @property
    def clamp_upper(self) -> list:
        """The largest start per ``start_map`` entry: ``dim - slice size``."""
        return [self.op_shape[d] - self.sizes[d] for d in self.start_map]

    @classmethod
    def of(cls, params, operand_aval, indices_aval, out_aval) -> GatherPlan:
        dn = params["dimension_numbers"]
        offset_dims = tuple(int(d) for d in dn.offset_dims)
        collapsed = frozenset(int(d) for d in dn.collapsed_slice_dims)
        start_map = tuple(int(d) for d in dn.start_index_map)
        op_batch = [int(d) for d in getattr(dn, "operand_batching_dims", ())]
        idx_batch = [int(d) for d in getattr(dn, "start_indices_batching_dims", ())]
        sizes = tuple(params["slice_sizes"])
        op_shape = tuple(operand_aval.shape)
        out_rank = len(out_aval.shape)
        if cp.is_complex(operand_aval):  # the (real, imag) axis: a full-size window kept last
            op_shape, sizes = tuple(cp.pair_shape(op_shape)), (*sizes, 2)
            offset_dims, out_rank = (*offset_dims, out_rank), out_rank + 1
        nb = len(indices_aval.shape) - 1
        rank = len(op_shape)

        # A start along an axis sliced at full size is 0 once clamped: that axis is not indexed.
        keep = tuple(k for k, d in enumerate(start_map) if not same_dim(sizes[d], op_shape[d]))
        indexed = tuple(start_map[k] for k in keep)
        rest = tuple(d for d in range(rank) if d not in op_batch and d not in indexed)
        if nb == 0 and not op_batch:
            path = "slice"
        elif not op_batch and len(indexed) == 1:
            path = "gather"
        elif (len(indexed) == 1 and indexed[0] in collapsed and sorted(op_batch + list(indexed)) == list(range(rank))
              and nb == len(op_batch) + 1):
            path = "elements"
        else:
            path = "nd"
        flat = len(start_map) == 1 and (path == "elements" or (path == "gather" and indexed[0] in collapsed))

        extra: dict = {}
        if path == "slice":
            labels = [("o", d) for d in range(rank)]
        elif path == "gather":
            axis = indexed[0]
            window = [] if axis in collapsed else [("o", axis)]  # (B..., 1) + (w,) -> (B..., w)
            labels = [("o", d) for d in range(axis)] + [("b", j) for j in range(nb)] + window
            labels += [("o", d) for d in range(axis + 1, rank)]
        elif path == "elements":  # take_along_axis: indices laid out like the operand
            partner = dict(zip(op_batch, idx_batch, strict=True))
            free = next(j for j in range(nb) if j not in idx_batch)
            order = tuple(free if d == indexed[0] else partner[d] for d in range(rank))
            labels = [("b", j) for j in order]
            extra = {"elements_order": order}
        else:
            pairs = sorted(zip(idx_batch, op_batch, strict=True))
            lead_idx = [j for j, _ in pairs]
            other = [j for j in range(nb) if j not in idx_batch]
            windowed = tuple(k for k, d in enumerate(indexed) if d not in collapsed)
            labels = ([("b", j) for j in lead_idx + other] + [("o", indexed[k]) for k in windowed]
                      + [("o", d) for d in rest])
            extra = {"nd_batch": len(pairs), "nd_data_perm": tuple([d for _, d in pairs] + list(indexed) + list(rest)),
                     "nd_idx_perm": tuple(lead_idx + other + [nb]), "nd_windowed": windowed}

        squeeze = tuple(i for i, lab in enumerate(labels) if lab[0] == "o" and lab[1] in collapsed)
        labels_left = [lab for i, lab in enumerate(labels) if i not in squeeze]
        window_dims = iter(d for d in range(rank) if d not in collapsed and d not in op_batch)
        batch_dims = iter(range(nb))
        wanted = [("o", next(window_dims)) if pos in offset_dims else ("b", next(batch_dims)) for pos in range(out_rank)]
        return cls(
            path=path, op_shape=op_shape, sizes=sizes, start_map=start_map, keep=keep, indexed=indexed,
            collapsed=collapsed, rest=rest, partial=tuple(d for d in rest if not same_dim(sizes[d], op_shape[d])),
            flat=flat, nb=nb, fill=mode_name(params.get("mode")) == "fill", labels=tuple(labels), squeeze=squeeze,
            perm=tuple(labels_left.index(lab) for lab in wanted), mask_axes=tuple(sorted(offset_dims)), **extra,
        )


@lowerings.register("gather")
def lower_gather(ctx, operand, indices):
    plan = GatherPlan.of(ctx.params, ctx.avals_in[0], ctx.avals_in[1], ctx.avals_out[0])
    idx = idx_all = ctx.cast(_without_index_axis(ctx, indices) if plan.flat else indices, np.int64)
    mask = None
    if plan.start_map:
        clamped = clamp_starts(ctx, idx, plan.clamp_upper)
        if plan.fill:
            mask = all_in_bounds(ctx, idx, clamped, 0 if plan.flat else len(plan.start_map))
        idx = clamped
    if len(plan.keep) < len(plan.start_map):
        idx = ctx.op.Gather(idx, ctx.i64(plan.keep), axis=plan.nb) if plan.keep else None
    data = operand
    if plan.partial:  # axes that are not indexed start at 0
        data = ctx.op.Slice(data, ctx.i64([0] * len(plan.partial)),
                            ctx.shape_tensor([plan.sizes[d] for d in plan.partial]), ctx.i64(plan.partial))

    y = _GATHER_EMIT[plan.path](ctx, plan, data, idx, idx_all)
    if plan.squeeze:
        y = ctx.op.Squeeze(y, ctx.i64(plan.squeeze))
    y = transpose(ctx, y, plan.perm)
    if mask is not None:
        if plan.mask_axes:
            mask = ctx.op.Unsqueeze(mask, ctx.i64(plan.mask_axes))
        fill = fill_value_for(ctx.avals_out[0].dtype, ctx.params.get("fill_value"))
        y = apply_fill(ctx, mask, y, cp.pair_array(fill, fill.dtype) if cp.is_complex(fill.dtype) else fill)
    return y


def apply_fill(ctx, mask, y, fill: np.ndarray):
    """``where(mask, y, fill)``; onnxruntime has no bool Where, so bools use And/Or."""
    if fill.dtype == np.bool_:
        return ctx.op.Or(y, ctx.op.Not(mask)) if bool(fill) else ctx.op.And(y, mask)
    return ctx.op.Where(mask, y, ctx.const(fill))


def _gather_as_slice(ctx, plan, data, idx, _idx_all):
    """No index batch dims: the gather is one window at (clamped) traced starts."""
    if not plan.indexed:
        return data
    ends = ctx.op.Add(idx, ctx.shape_tensor([plan.sizes[d] for d in plan.indexed]))
    return ctx.op.Slice(data, idx, ends, ctx.i64(plan.indexed))


def _gather_one_axis(ctx, plan, data, idx, _idx_all):
    axis = plan.indexed[0]
    if axis in plan.collapsed:
        comp = idx if plan.flat else ctx.op.Squeeze(idx, ctx.i64([-1]))
    else:  # every position of the window
        comp = ctx.op.Add(idx, arange(ctx, plan.sizes[axis]))
    return ctx.op.Gather(data, comp, axis=axis)


def _gather_elements(ctx, plan, data, idx, _idx_all):
    comp = transpose(ctx, idx if plan.flat else ctx.op.Squeeze(idx, ctx.i64([-1])), plan.elements_order)
    return ctx.op.GatherElements(data, comp, axis=plan.indexed[0])


def _gather_nd(ctx, plan, data, idx, idx_all):
    nb = plan.nb
    data = transpose(ctx, data, plan.nd_data_perm)
    if not plan.indexed:
        # Nothing left to index (only batching dims or full-size windows), but GatherND needs an
        # index: give the data a unit axis and index 0 there, with an index of shape (B..., 1).
        data = ctx.op.Unsqueeze(data, ctx.i64([plan.nd_batch]))
        empty = ctx.op.Slice(idx_all, ctx.i64([0]), ctx.i64([0]), ctx.i64([nb]))
        idx = ctx.op.Pad(empty, ctx.i64([0] * (2 * nb + 1) + [1]))
    idx = transpose(ctx, idx, plan.nd_idx_perm)
    if plan.nd_windowed:
        idx = ctx.op.Unsqueeze(idx, ctx.i64(range(nb, nb + len(plan.nd_windowed))))
        sizes = [plan.sizes[plan.indexed[k]] for k in plan.nd_windowed]
        idx = ctx.op.Add(idx, window_offsets(ctx, sizes, plan.nd_windowed, len(plan.indexed)))
    return ctx.op.GatherND(data, idx, batch_dims=plan.nd_batch)


_GATHER_EMIT = {"slice": _gather_as_slice, "gather": _gather_one_axis, "elements": _gather_elements, "nd": _gather_nd}

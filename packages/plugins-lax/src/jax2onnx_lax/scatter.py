"""lax scatter, scatter-add/-sub/-mul/-min/-max -> one ONNX ScatterND (reduction none/add/mul/min/max).

How a ``ScatterDimensionNumbers`` maps to ScatterND: the operand is transposed so the dims that need
an index come first (``scatter_dims_to_operand_dims`` in order, then batching dims, inserted dims
that are not indexed, and windows narrower than their dim) and the windows spanning a whole dim
last (ScatterND writes those as slices). The index tensor holds one row per updated slice: the
traced starts, plus ``arange`` along each window that is expanded into index axes, plus ``iota``
for batching dims; the updates are transposed to match.

Modes: CLIP and PROMISE_IN_BOUNDS clamp starts into ``[0, dim - window]`` (onnxruntime rejects
out-of-range indices; for broken promises XLA's results are unspecified anyway). FILL_OR_DROP
drops every window that would leave the operand: such windows are redirected into padding added
past the end of the first indexed dim, which is sliced off afterwards, so every reduction stays
exact (no neutral-element tricks).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from jax2onnx.plugin import Kernels, Lowerings

from . import complex_pairs as cp
from .indexing import all_in_bounds, arange, window_offsets
from .shape_helpers import clamp_starts, inverse_perm, mode_name, same_dim, transpose

lowerings = Lowerings()

#: JAX primitive name (both spellings: "scatter-add" up to now, "scatter_add" in some versions)
#: -> (ScatterND reduction, negate the updates first).
SCATTER_REDUCTIONS = {
    "scatter": ("none", False),
    "scatter-add": ("add", False),
    "scatter_add": ("add", False),
    "scatter-sub": ("add", True),
    "scatter_sub": ("add", True),
    "scatter-mul": ("mul", False),
    "scatter_mul": ("mul", False),
    "scatter-min": ("min", False),
    "scatter_min": ("min", False),
    "scatter-max": ("max", False),
    "scatter_max": ("max", False),
}


def _plain_replace(update_jaxpr) -> bool:
    """True for ``scatter``'s own combiner (none, or one that returns the update unchanged)."""
    if update_jaxpr is None:
        return True
    jaxpr = getattr(update_jaxpr, "jaxpr", update_jaxpr)
    return not jaxpr.eqns and len(jaxpr.invars) == 2 and jaxpr.outvars[0] is jaxpr.invars[1]


@dataclasses.dataclass(frozen=True)
class ScatterPlan:
    """The axis arithmetic of one scatter, from its params and avals alone (no ONNX): how operand
    and updates are transposed for one ScatterND, and which columns the index rows hold.

    The operand is transposed to ``data_perm``: ``scatter_map`` (traced starts), then ``extra``
    (dims that need an index but have no traced start), then ``full`` (windows spanning their whole
    dim, which ScatterND writes as slices). Windows along ``expanded`` dims are written element by
    element, so they become index axes after the ``nb`` batch axes of the indices.
    """

    op_shape: tuple  # operand dims; a complex operand gets its (real, imag) axis appended
    nb: int  # batch rank of the indices
    scatter_map: tuple[int, ...]
    extra: tuple[int, ...]
    full: tuple[int, ...]
    expanded: tuple[int, ...]
    size: dict  # operand dim -> window size along it
    data_perm: tuple[int, ...]
    upd_perm: tuple[int, ...]
    #: per ``extra`` dim, its index column: ``("iota", index axis, length)`` counts along that axis
    #: (a batching dim follows its index batch axis, a narrow window its expanded axis), ``None``
    #: is position 0 (an inserted dim that is not indexed)
    extra_sources: tuple
    offset_columns: tuple  # per ``expanded`` dim: its column in the index rows, or None
    fill: bool  # FILL_OR_DROP: out-of-range windows are redirected into padding, sliced off after

    @property
    def rank(self) -> int:
        return len(self.op_shape)

    @property
    def lead(self) -> int:
        """Index axes before the row axis: the index batch axes, then one per expanded window."""
        return self.nb + len(self.expanded)

    @property
    def depth(self) -> int:
        """Length of an index row; 0 when every dim is written whole."""
        return len(self.scatter_map) + len(self.extra)

    @property
    def clamp_upper(self) -> list:
        return [self.op_shape[d] - self.size[d] for d in self.scatter_map]

    @classmethod
    def of(cls, params, operand_aval, indices_aval, updates_aval) -> ScatterPlan:
        dn = params["dimension_numbers"]
        window_dims = [int(a) for a in dn.update_window_dims]
        inserted = {int(d) for d in dn.inserted_window_dims}
        scatter_map = tuple(int(d) for d in dn.scatter_dims_to_operand_dims)
        op_batch = [int(d) for d in getattr(dn, "operand_batching_dims", ())]
        idx_batch = [int(d) for d in getattr(dn, "scatter_indices_batching_dims", ())]
        op_shape, upd_shape = tuple(operand_aval.shape), tuple(updates_aval.shape)
        if cp.is_complex(operand_aval):  # the (real, imag) axis: a whole-dim window kept last
            window_dims.append(len(upd_shape))
            op_shape, upd_shape = tuple(cp.pair_shape(op_shape)), tuple(cp.pair_shape(upd_shape))
        rank, nb = len(op_shape), len(indices_aval.shape) - 1

        # Which update axis is the window along each operand dim, and the window sizes.
        windowed = [d for d in range(rank) if d not in inserted and d not in op_batch]
        upd_axis = dict(zip(windowed, window_dims, strict=True))
        size = {d: (upd_shape[upd_axis[d]] if d in upd_axis else 1) for d in range(rank)}
        full = tuple(d for d in windowed if d not in scatter_map and same_dim(size[d], op_shape[d]))
        extra = tuple(d for d in range(rank) if d not in scatter_map and d not in full)
        expanded = tuple(d for d in windowed if d not in full)
        upd_scatter_axes = [a for a in range(len(upd_shape)) if a not in window_dims]
        sources = []
        for d in extra:
            if d in op_batch:
                j = idx_batch[op_batch.index(d)]
                sources.append(("iota", j, indices_aval.shape[j]))
            elif d in inserted:
                sources.append(None)
            else:  # a window narrower than its dim, starting at 0
                sources.append(("iota", nb + expanded.index(d), size[d]))
        return cls(
            op_shape=op_shape, nb=nb, scatter_map=scatter_map, extra=extra, full=full, expanded=expanded, size=size,
            data_perm=scatter_map + extra + full,
            upd_perm=tuple(upd_scatter_axes + [upd_axis[d] for d in expanded] + [upd_axis[d] for d in full]),
            extra_sources=tuple(sources),
            offset_columns=tuple(scatter_map.index(d) if d in scatter_map else None for d in expanded),
            fill=mode_name(params.get("mode")) == "fill",
        )


def _index_rows(ctx, plan, indices, upd):
    """The ScatterND index (``lead`` axes + one row axis) and, for FILL_OR_DROP, the padding
    ``(data axis 0 extra size)`` that out-of-range rows were redirected into."""
    parts, pad, lead = [], None, plan.lead
    if plan.scatter_map:
        idx = ctx.cast(indices, np.int64)
        clamped = clamp_starts(ctx, idx, plan.clamp_upper)
        if plan.fill:
            # Out-of-range windows go to padding past the end of data axis 0, sliced off after.
            ok = all_in_bounds(ctx, idx, clamped, len(plan.scatter_map), keepdims=True)
            first = plan.scatter_map[0]
            away = ctx.shape_tensor([plan.op_shape[first]] + [0] * (len(plan.scatter_map) - 1))
            clamped = ctx.op.Where(ok, clamped, away)
            pad = plan.size[first]
        if plan.expanded:
            clamped = ctx.op.Unsqueeze(clamped, ctx.i64(range(plan.nb, lead)))
            if any(c is not None for c in plan.offset_columns):  # else the Expand below broadcasts
                offsets = window_offsets(ctx, [plan.size[d] for d in plan.expanded], plan.offset_columns,
                                         len(plan.scatter_map))
                clamped = ctx.op.Add(clamped, offsets)
        parts.append(clamped)
    for source in plan.extra_sources:
        if source is None:
            parts.append(ctx.const(np.zeros([1] * (lead + 1), np.int64)))
        else:
            _, j, n = source
            parts.append(ctx.op.Unsqueeze(arange(ctx, n), ctx.i64([a for a in range(lead + 1) if a != j])))
    if len(parts) == 1 and plan.scatter_map:
        return parts[0], pad
    shape = ctx.op.Concat(ctx.op.Shape(upd, start=0, end=lead), ctx.i64([1]), axis=0)
    return ctx.op.Concat(*[ctx.op.Expand(p, shape) for p in parts], axis=-1), pad


def lower_scatter(ctx, operand, indices, updates):
    reduction, negate = SCATTER_REDUCTIONS[ctx.primitive]
    if ctx.primitive == "scatter" and not _plain_replace(ctx.params.get("update_jaxpr")):
        raise NotImplementedError("scatter with a custom combiner (x.at[...].apply(f)) has no ONNX equivalent")
    plan = ScatterPlan.of(ctx.params, *ctx.avals_in)
    if negate:
        updates = ctx.op.Neg(updates)
    data = transpose(ctx, operand, plan.data_perm)
    upd = transpose(ctx, updates, plan.upd_perm)
    pad = None
    if plan.depth == 0:
        # Every dim is written whole: index a unit axis put in front of the data instead.
        data = ctx.op.Unsqueeze(data, ctx.i64([0]))
        empty = ctx.op.Slice(ctx.cast(indices, np.int64), ctx.i64([0]), ctx.i64([0]), ctx.i64([plan.nb]))
        index = ctx.op.Pad(empty, ctx.i64([0] * (2 * plan.nb + 1) + [1]))
    else:
        index, pad = _index_rows(ctx, plan, indices, upd)
    if pad is not None:
        pads = [0] * (2 * plan.rank)
        pads[plan.rank] = pad
        data = ctx.op.Pad(data, ctx.shape_tensor(pads))
    y = ctx.op.ScatterND(data, index, upd, reduction=reduction)
    if pad is not None:
        y = ctx.op.Slice(y, ctx.i64([0]), ctx.shape_tensor([plan.op_shape[plan.scatter_map[0]]]), ctx.i64([0]))
    if plan.depth == 0:
        y = ctx.op.Squeeze(y, ctx.i64([0]))
    return transpose(ctx, y, inverse_perm(plan.data_perm))


# A reduction computes in the dtypes the target's ScatterND has that reduction for (onnxruntime's
# CPU provider reduces no 16-bit floats, nor bool by max/min: those go to float32/uint8, core casts).
for _name, (_reduction, _) in SCATTER_REDUCTIONS.items():
    if _reduction == "none":
        lowerings.add(_name, lower_scatter)
    elif _reduction == "add":  # (real, imag) pairs add part by part
        lowerings.add(_name, lower_scatter, dtypes=Kernels(f"ScatterND:{_reduction}"))
    else:  # a complex product or order is not one per part
        lowerings.add(_name, lower_scatter, dtypes=Kernels(f"ScatterND:{_reduction}"), complex=cp.unsupported)

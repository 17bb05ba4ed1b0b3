"""``jnp.take`` → Gather, ``jnp.take_along_axis`` → GatherElements.

JAX's out-of-bounds modes are kept exactly: ``"fill"`` (the default) wraps negative indices once
and fills what is still out of range with ``fill_value`` (NaN for floats, the dtype's extreme for
integers); ``"clip"`` clamps; ``"wrap"`` (take only) takes indices modulo the axis size. ONNX's
Gather would fail at runtime on an out-of-range index, so indices are made safe first.

Found in the trace with nothing patched (:mod:`._library`): ``jnp.take`` calls the jitted
``jax._src.numpy.indexing._take``, ``jnp.take_along_axis`` is jitted; axis, mode and fill value are
read back from the body's ``gather``.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax2onnx.plugin import Lowerings

from ._common import along_axis
from ._library import literal_value, one

lowerings = Lowerings()

def _default_fill(dtype):
    dtype = np.dtype(dtype)
    if jnp.issubdtype(dtype, jnp.inexact):  # numpy's own test misses bfloat16 and the float8s
        return np.nan
    if dtype == np.bool_:
        return True
    info = np.iinfo(dtype)
    return info.min if np.issubdtype(dtype, np.signedinteger) else info.max


def _safe_indices(ctx, idx, size, mode, normalize_negative):
    """``(indices Gather can use, validity mask or None)``; ``size`` is the axis size (int64 [1])."""
    idx = ctx.cast(idx, np.int64)
    zero = ctx.i64(0)
    size = ctx.op.Squeeze(size, ctx.i64([0]))
    if mode == "wrap":
        return ctx.op.Mod(idx, size), None  # fmod=0: the sign of the divisor, like Python's %
    if normalize_negative:
        idx = ctx.op.Where(ctx.op.Less(idx, zero), ctx.op.Add(idx, size), idx)
    if mode == "clip":
        return ctx.op.Clip(idx, zero, ctx.op.Sub(size, 1)), None
    if mode == "promise_in_bounds":
        return idx, None
    valid = ctx.op.And(ctx.op.GreaterOrEqual(idx, zero), ctx.op.Less(idx, size))
    return ctx.op.Where(valid, idx, zero), valid


def _fill(ctx, gathered, valid, fill_value):
    dtype = ctx.avals_out[0].dtype
    value = _default_fill(dtype) if fill_value is None else fill_value
    return ctx.op.Where(valid, gathered, ctx.const(value, dtype))


# ---------------------------------------------------------------------------------------------
# take


def _gather_mode(site, gather):
    """The numpy-level ``mode`` a body's gather implements: ``"wrap"`` takes the indices modulo the
    size first (a ``rem``), then gathers in bounds."""
    mode = str(gather.params["mode"]).rpartition(".")[2].upper()
    if mode in ("CLIP", "1"):
        return "clip"
    if mode in ("FILL_OR_DROP", "2"):
        return "fill"
    if mode in ("PROMISE_IN_BOUNDS", "3"):
        return "wrap" if site.eqns("rem") else "promise_in_bounds"
    return None


def _fill_param(gather, dtype):
    """The gather's fill value as the caller's ``fill_value``: None where it is the dtype's default."""
    value = gather.params.get("fill_value")
    if value is None:
        return None
    default = _default_fill(dtype)
    same = (np.isnan(value) and np.isnan(default)) if isinstance(default, float) else value == default
    return None if same else value.item() if hasattr(value, "item") else value


def _arrays(site, n):
    return len(site.operands) == n and all(literal_value(site, i) is None for i in range(n))


def recognize_take(site):
    """``_take(a, indices, axis, mode, fill_value, ...)`` from its gather: the axis is the gathered
    one (None, numpy's flattened array, when the body reshapes ``a`` to 1-D first)."""
    gather = one(site, "gather")
    if gather is None or not _arrays(site, 2) or not np.issubdtype(np.dtype(site.avals_in[1].dtype), np.integer):
        return None
    a = site.avals_in[0]
    dims = gather.params["dimension_numbers"]
    if not a.shape or len(dims.start_index_map) != 1 or getattr(dims, "operand_batching_dims", ()):
        return None
    mode = _gather_mode(site, gather)
    if mode is None:
        return None
    first = (site.body.jaxpr if hasattr(site.body, "jaxpr") else site.body).invars[0]
    flattened = len(a.shape) != 1 and any(e.invars[0] is first for e in site.eqns("reshape"))
    return {
        "axis": None if flattened else int(dims.start_index_map[0]),
        "mode": None if mode == "fill" else mode,
        "fill_value": _fill_param(gather, site.avals_out[0].dtype) if mode == "fill" else None,
        "unique_indices": bool(gather.params["unique_indices"]),
        "indices_are_sorted": bool(gather.params["indices_are_sorted"]),
    }


@lowerings.register_library("jax._src.numpy.indexing:_take", recognize=recognize_take)
def lower_take(ctx, a, indices):
    p = ctx.marked.params
    a, size, axis = along_axis(ctx, a, p["axis"])  # axis=None: take from the flattened array
    mode = p["mode"] or "fill"
    # JAX wraps negative indices for "fill" only; "clip" clamps them to 0.
    safe, valid = _safe_indices(ctx, indices, size, mode, normalize_negative=mode == "fill")
    gathered = ctx.op.Gather(a, safe, axis=axis)
    if valid is None:
        return gathered
    # The mask has the indices' shape; in the output those axes sit at `axis`.
    n_idx = len(ctx.avals_in[1].shape)
    lead, trail = list(range(axis)), list(range(axis + n_idx, len(ctx.avals_out[0].shape)))
    if lead or trail:
        valid = ctx.op.Unsqueeze(valid, ctx.i64(lead + trail))
    return _fill(ctx, gathered, valid, p.get("fill_value"))


# ---------------------------------------------------------------------------------------------
# take_along_axis


def recognize_take_along_axis(site):
    """``take_along_axis(arr, indices, axis, mode, fill_value)`` from its gather, whose batching
    dims are every axis but the taken one. GatherElements needs the other axes equal (JAX would
    broadcast size-1 ones): other shapes decline."""
    gather = one(site, "gather")
    if gather is None or not _arrays(site, 2) or not np.issubdtype(np.dtype(site.avals_in[1].dtype), np.integer):
        return None
    arr, idx = site.avals_in
    dims = gather.params["dimension_numbers"]
    batching = tuple(getattr(dims, "operand_batching_dims", ()))
    if len(arr.shape) != len(idx.shape) or not arr.shape or len(dims.start_index_map) != 1:
        return None
    axis = int(dims.start_index_map[0])
    if sorted(batching) != [d for d in range(len(arr.shape)) if d != axis]:
        return None
    if any(str(d) != str(e) for i, (d, e) in enumerate(zip(arr.shape, idx.shape, strict=True)) if i != axis):
        return None
    mode = _gather_mode(site, gather)
    if mode not in ("fill", "clip", "promise_in_bounds"):
        return None
    fill = _fill_param(gather, site.avals_out[0].dtype) if mode == "fill" else None
    return {"axis": axis, "mode": None if mode == "fill" else mode, "fill_value": fill}


@lowerings.register_library("jax.numpy.take_along_axis", recognize=recognize_take_along_axis)
def lower_take_along_axis(ctx, arr, indices):
    p = ctx.marked.params
    axis = p["axis"]
    mode = p["mode"] or "fill"
    size = ctx.dim(ctx.avals_in[0].shape[axis])
    # take_along_axis wraps negative indices in every mode but promise_in_bounds.
    safe, valid = _safe_indices(ctx, indices, size, mode, normalize_negative=mode != "promise_in_bounds")
    gathered = ctx.op.GatherElements(arr, safe, axis=axis)
    return gathered if valid is None else _fill(ctx, gathered, valid, p["fill_value"])

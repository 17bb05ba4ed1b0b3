"""``jnp.take`` → Gather, ``jnp.take_along_axis`` → GatherElements.

JAX's out-of-bounds modes are kept exactly: ``"fill"`` (the default) wraps negative indices once
and fills what is still out of range with ``fill_value`` (NaN for floats, the dtype's extreme for
integers); ``"clip"`` clamps; ``"wrap"`` (take only) takes indices modulo the axis size. ONNX's
Gather would fail at runtime on an out-of-range index, so indices are made safe first.
"""

from __future__ import annotations

import functools

import jax.numpy as jnp
import numpy as np
from jax2onnx.plugin import Lowerings, is_array

from ._common import along_axis, is_static_int, is_static_number, mark, mark_name, patches_for

lowerings = Lowerings()

_MODES = (None, "fill", "clip", "wrap", "promise_in_bounds")


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


def _take_region(original, a, indices, **params):
    return original(a, indices, **params)


def _make_take(name, original):
    region = functools.partial(_take_region, original)

    @functools.wraps(original)
    def take(a, indices, axis=None, out=None, mode=None, **kwargs):
        fill_value = kwargs.get("fill_value")
        if (
            is_array(a)
            and is_array(indices)
            and np.issubdtype(indices.dtype, np.integer)
            and out is None
            and mode in _MODES
            and (axis is None or is_static_int(axis))
            and set(kwargs) <= {"fill_value", "unique_indices", "indices_are_sorted"}
            and (fill_value is None or is_static_number(fill_value))
            and np.ndim(a) >= 1
        ):
            params = {"axis": None if axis is None else int(axis) % np.ndim(a), "mode": mode, **kwargs}
            return mark("take", region, a, indices, **params)
        return original(a, indices, axis, out, mode, **kwargs)

    return take


@lowerings.register_call(mark_name("take"))
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


def _make_take_along_axis(name, original):
    region = functools.partial(_take_region, original)

    @functools.wraps(original)
    def take_along_axis(arr, indices, axis=-1, mode=None, fill_value=None, **kwargs):
        ok = (
            is_array(arr)
            and is_array(indices)
            and np.issubdtype(indices.dtype, np.integer)
            and is_static_int(axis)
            and mode in (None, "fill", "clip", "promise_in_bounds")
            and (fill_value is None or is_static_number(fill_value))
            and not kwargs
            and np.ndim(arr) == np.ndim(indices) >= 1
        )
        if ok:
            ax = int(axis) % np.ndim(arr)
            # GatherElements needs the other axes equal (JAX would broadcast size-1 ones).
            same = all(str(d) == str(e) for i, (d, e) in enumerate(zip(arr.shape, indices.shape, strict=True))
                       if i != ax)
            if same:
                return mark("take_along_axis", region, arr, indices, axis=ax, mode=mode, fill_value=fill_value)
        return original(arr, indices, axis, mode, fill_value, **kwargs)

    return take_along_axis


@lowerings.register_call(mark_name("take_along_axis"))
def lower_take_along_axis(ctx, arr, indices):
    p = ctx.marked.params
    axis = p["axis"]
    mode = p["mode"] or "fill"
    size = ctx.dim(ctx.avals_in[0].shape[axis])
    # take_along_axis wraps negative indices in every mode but promise_in_bounds.
    safe, valid = _safe_indices(ctx, indices, size, mode, normalize_negative=mode != "promise_in_bounds")
    gathered = ctx.op.GatherElements(arr, safe, axis=axis)
    return gathered if valid is None else _fill(ctx, gathered, valid, p["fill_value"])


patches = patches_for("jax.numpy", ["take"], _make_take) + patches_for(
    "jax.numpy", ["take_along_axis"], _make_take_along_axis
)

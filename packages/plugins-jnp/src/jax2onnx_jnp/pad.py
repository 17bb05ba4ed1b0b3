"""``jnp.pad`` → one Pad with the matching ``mode``.

JAX builds reflect/edge/wrap padding from slices, reversals and concatenations; ONNX Pad has
these modes. Only exact matches are marked: static non-negative widths; ``constant`` with one
static fill value; ``reflect`` with ``reflect_type="even"`` and widths below the (static) axis
size (onnxruntime's limit; JAX reflects repeatedly beyond it); ``edge``; ``wrap``. ``symmetric``,
statistics modes and callables decline to the lax decomposition.
"""

from __future__ import annotations

import functools

import numpy as np
from jax2onnx.plugin import Lowerings, is_array

from ._common import is_static_int, is_static_number, mark, mark_name, patches_for

lowerings = Lowerings()


def _widths(pad_width, ndim):
    """Per-axis ``(before, after)`` as Python ints, or None when not static non-negative ints."""
    try:
        arr = np.asarray(pad_width, dtype=object)
        if not all(is_static_int(v) for v in arr.reshape(-1)):
            return None
        arr = np.broadcast_to(np.asarray(pad_width, dtype=np.int64), (ndim, 2))
    except (ValueError, TypeError):
        return None
    if (arr < 0).any():
        return None
    return tuple((int(b), int(a)) for b, a in arr)


def _fits(mode, widths, shape, kwargs):
    if mode == "constant":
        value = kwargs.get("constant_values", 0)
        return set(kwargs) <= {"constant_values"} and (is_static_number(value) or isinstance(value, bool))
    if mode == "reflect":
        if not set(kwargs) <= {"reflect_type"} or kwargs.get("reflect_type", "even") != "even":
            return False
        for (before, after), d in zip(widths, shape, strict=True):
            if (before or after) and not (is_static_int(d) and max(before, after) < d):
                return False
        return True
    return mode in ("edge", "wrap") and not kwargs


def _pad_region(original, x, *, pad_width, mode, **kwargs):
    return original(x, pad_width, mode, **kwargs)


def _make_pad(name, original):
    region = functools.partial(_pad_region, original)

    @functools.wraps(original)
    def pad(array, pad_width, mode="constant", **kwargs):
        widths = _widths(pad_width, np.ndim(array)) if is_array(array) and np.ndim(array) >= 1 else None
        if widths is not None and isinstance(mode, str) and _fits(mode, widths, np.shape(array), kwargs):
            return mark("pad", region, array, pad_width=widths, mode=mode, **kwargs)
        return original(array, pad_width, mode, **kwargs)

    return pad


@lowerings.register_call(mark_name("pad"))
def lower_pad(ctx, x):
    p = ctx.marked.params
    widths = p["pad_width"]
    pads = ctx.i64([b for b, _ in widths] + [a for _, a in widths])
    if p["mode"] == "constant":
        value = ctx.const(p.get("constant_values", 0), ctx.avals_out[0].dtype)
        return ctx.op.Pad(x, pads, value, mode="constant")
    return ctx.op.Pad(x, pads, mode=p["mode"])


patches = patches_for("jax.numpy", ["pad"], _make_pad)

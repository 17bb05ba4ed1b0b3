"""Shared pieces of the jnp pack: argument checks and small ONNX helpers.

Every function of this pack is a library lowering (:meth:`jax2onnx.plugin.Lowerings.register_library`):
core finds the library's call in the trace (its jit equation, or the equations whose traceback
passes through it), the pack's recognizer reads the static parameters back (``_library.py``), and
core accepts them only if tracing the original with them gives the same equations; the lowering
emits the single ONNX op or declines, and the equations are lowered one by one. Nothing of
``jax.numpy``/``jax.nn`` is replaced, at any time (issue #33).
"""

from __future__ import annotations

from typing import Any

import numpy as np

# ---------------------------------------------------------------------------------------------
# Argument checks used by replacements (trace time)


def is_static_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


def is_static_number(x: Any) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, (bool, np.bool_))


def normalize_axes(axis: Any, ndim: int) -> tuple[int, ...] | None:
    """``axis`` (None = all, int, or sequence) as sorted non-negative ints; None if not static."""
    if axis is None:
        return tuple(range(ndim))
    items = (axis,) if is_static_int(axis) else tuple(axis) if isinstance(axis, (tuple, list)) else None
    if items is None or not all(is_static_int(a) for a in items):
        return None
    out = []
    for a in items:
        a = int(a)
        if not -ndim <= a < max(ndim, 1):
            return None
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        return None
    return tuple(sorted(out))


def no_extra_kwargs(kwargs: dict[str, Any], **allowed_defaults: Any) -> bool:
    """True when every keyword in ``kwargs`` is one of ``allowed_defaults`` with that default."""
    for k, v in kwargs.items():
        if k not in allowed_defaults:
            return False
        want = allowed_defaults[k]
        if v is not want and v != want:
            return False
    return True


# ---------------------------------------------------------------------------------------------
# Dtype tests (export time; constants, casts and dims come from the context: ctx.i64, ctx.cast,
# ctx.dim_scalar)


def along_axis(ctx: Any, x: Any, axis: int | None) -> tuple[Any, Any, int]:
    """``(x, n, axis)`` for an op along ``axis`` of the operand ``x`` (shape ``ctx.avals_in[0]``):
    numpy's ``axis=None`` means the flattened array (``x`` reshaped to 1-D, axis 0); ``n`` is the
    length along the axis as a 1-element int64 tensor (TopK's k, a bound for indices), computed in
    the graph when the shape is symbolic."""
    shape = list(ctx.avals_in[0].shape)
    if axis is not None:
        return x, ctx.dim(shape[axis]), axis
    x = ctx.op.Reshape(x, ctx.i64([-1]))
    size = ctx.op.Size(x) if not ctx.is_static(shape) else ctx.i64(int(np.prod(shape)))
    return x, ctx.op.Reshape(size, ctx.i64([1])), 0

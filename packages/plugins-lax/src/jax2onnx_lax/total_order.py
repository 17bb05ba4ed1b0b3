"""lax ``eq_to``/``lt_to``/``le_to``: the total-order comparisons newer JAX emits in sort comparators
(``jnp.searchsorted``, ``interp``, ``digitize``, ``histogram``, ``expm``'s Padé selection).

XLA's TOTALORDER puts ``-0.0`` before ``+0.0`` and NaN after ``+inf`` (NaNs equal to each other).
ONNX compares with IEEE semantics, so the differences are spelled out: NaN operands are decided by
``IsNaN``, and equal zeros by their sign, read as the sign of ``1 / x``. A NaN with the sign bit set
(which XLA orders before ``-inf``) is treated like any other NaN: ONNX has no op that reads a NaN's
sign, and JAX's comparators canonicalise NaNs before comparing. Integers compare as usual; bools
(which ONNX's Less/LessOrEqual do not take) as ``not x and y`` / ``not x or y``.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.dtypes import BF16, F32, is_bool, is_float
from jax2onnx.plugin import Lowerings

lowerings = Lowerings()


def _is_float(ctx):
    return is_float(ctx.avals_in[0].dtype)  # bfloat16 too (numpy's kind for it is "V")


def _is_bool(ctx):
    return is_bool(ctx.avals_in[0].dtype)


def _floats(ctx, x, y):
    """bfloat16 compares in float32 (exact): onnxruntime's IsNaN has no bfloat16 kernel before opset 20."""
    if np.dtype(ctx.avals_in[0].dtype) == BF16:
        return ctx.cast(x, F32), ctx.cast(y, F32)
    return x, y


def _neg_zero(op, x):
    return op.And(op.Equal(x, 0.0), op.Less(op.Reciprocal(x), 0.0))


def _select(op, cond, a, b):
    """Where for bools (onnxruntime has no bool Where kernel)."""
    return op.Or(op.And(cond, a), op.And(op.Not(cond), b))


def _lt(op, x, y):
    nan_x, nan_y = op.IsNaN(x), op.IsNaN(y)
    either = op.Or(nan_x, nan_y)
    zeros = op.And(op.And(op.Equal(x, y), _neg_zero(op, x)), op.Not(_neg_zero(op, y)))
    return _select(op, either, op.And(op.Not(nan_x), nan_y), op.Or(op.Less(x, y), zeros))


def _eq(op, x, y):
    nan_x, nan_y = op.IsNaN(x), op.IsNaN(y)
    same_sign = op.Equal(_neg_zero(op, x), _neg_zero(op, y))
    return _select(op, op.Or(nan_x, nan_y), op.And(nan_x, nan_y), op.And(op.Equal(x, y), same_sign))


@lowerings.register("lt_to")
def lower_lt_to(ctx, x, y):
    if _is_bool(ctx):
        return ctx.op.And(ctx.op.Not(x), y)
    return _lt(ctx.op, *_floats(ctx, x, y)) if _is_float(ctx) else ctx.op.Less(x, y)


@lowerings.register("le_to")
def lower_le_to(ctx, x, y):
    if _is_bool(ctx):
        return ctx.op.Or(ctx.op.Not(x), y)
    if not _is_float(ctx):
        return ctx.op.LessOrEqual(x, y)
    x, y = _floats(ctx, x, y)
    return ctx.op.Or(_lt(ctx.op, x, y), _eq(ctx.op, x, y))


@lowerings.register("eq_to")
def lower_eq_to(ctx, x, y):
    return _eq(ctx.op, *_floats(ctx, x, y)) if _is_float(ctx) else ctx.op.Equal(x, y)

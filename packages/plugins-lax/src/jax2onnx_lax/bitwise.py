"""lax logical/bitwise ops: and, or, xor, not (bool: logic ops; ints: Bitwise*), the three shifts,
population_count and clz.

onnxruntime's BitShift only has unsigned kernels, so signed ints shift in the unsigned type of the
same width: Cast between them is a two's-complement reinterpretation (modular, both ways).
"""

from __future__ import annotations

import numpy as np
from jax2onnx.dtypes import I32, bits, is_bool, unsigned_of
from jax2onnx.plugin import Lowerings

from . import _numeric as nm

lowerings = Lowerings()

#: lax primitive -> (ONNX op on bool, ONNX op on ints).
LOGICAL = {"and": ("And", "BitwiseAnd"), "or": ("Or", "BitwiseOr"), "xor": ("Xor", "BitwiseXor"),
           "not": ("Not", "BitwiseNot")}


def _logical(bool_op: str, int_op: str):
    def lower(ctx, *xs):
        return getattr(ctx.op, bool_op if is_bool(nm.dtype_of(ctx.avals_in[0])) else int_op)(*xs)

    lower.__name__ = f"lower_{int_op.lower()}"
    return lower


for _prim, (_bool_op, _int_op) in LOGICAL.items():
    lowerings.add(_prim, _logical(_bool_op, _int_op))


def _out_of_range(ctx, amount_u, width: int):
    """Shift amounts outside [0, width) (negative ones are huge once unsigned): XLA gives 0 for
    logical shifts and the sign fill for arithmetic ones; C++ shifts would wrap the amount."""
    return ctx.op.GreaterOrEqual(amount_u, width)


def _shift(ctx, x, y, direction: str, arithmetic: bool = False):
    dtype = nm.dtype_of(ctx.avals_in[0])
    udtype, width = unsigned_of(dtype), bits(dtype)
    xu, yu = ctx.cast(x, udtype), ctx.cast(y, udtype)
    zero = ctx.const(0, udtype)
    big = _out_of_range(ctx, yu, width)
    safe_amount = nm.where(ctx, big, zero, yu, udtype)
    if not arithmetic:
        shifted = nm.where(ctx, big, zero, ctx.op.BitShift(xu, safe_amount, direction=direction), udtype)
        return ctx.cast(shifted, dtype)
    # Arithmetic right shift: with m = all ones when the top bit is set, x >>a n == ((x ^ m) >> n) ^ m.
    top = ctx.op.BitShift(xu, width - 1, direction="RIGHT")
    mask = ctx.op.Sub(zero, top)
    flipped = ctx.op.BitShift(ctx.op.BitwiseXor(xu, mask), safe_amount, direction="RIGHT")
    flipped = nm.where(ctx, big, zero, flipped, udtype)
    return ctx.cast(ctx.op.BitwiseXor(flipped, mask), dtype)


@lowerings.register("shift_left")
def lower_shift_left(ctx, x, y):
    return _shift(ctx, x, y, "LEFT")


@lowerings.register("shift_right_logical")
def lower_shift_right_logical(ctx, x, y):
    return _shift(ctx, x, y, "RIGHT")


@lowerings.register("shift_right_arithmetic")
def lower_shift_right_arithmetic(ctx, x, y):
    return _shift(ctx, x, y, "RIGHT", arithmetic=True)


def bit_planes(ctx, x, dtype):
    """``x``'s bits as a new last axis of int32 0/1 (bit k at index k), for any int dtype."""
    udtype, width = unsigned_of(dtype), bits(dtype)
    xu = ctx.cast(x, udtype)
    positions = ctx.const(np.arange(width), udtype)
    column = ctx.op.Unsqueeze(xu, ctx.i64([-1]))
    planes = ctx.op.BitwiseAnd(ctx.op.BitShift(column, positions, direction="RIGHT"), 1)
    return ctx.cast(planes, I32)


@lowerings.register("population_count")
def lower_population_count(ctx, x):
    dtype = nm.dtype_of(ctx.avals_in[0])
    count = ctx.op.ReduceSum(bit_planes(ctx, x, dtype), ctx.i64([-1]), keepdims=0)
    return ctx.cast(count, dtype)


@lowerings.register("clz")
def lower_clz(ctx, x):
    """width - 1 - (position of the highest set bit), the position being -1 for zero."""
    dtype = nm.dtype_of(ctx.avals_in[0])
    width = bits(dtype)
    planes = bit_planes(ctx, x, dtype)
    positions = ctx.const(np.arange(width), I32)
    set_positions = ctx.op.Where(ctx.op.Equal(planes, 1), positions, -1)
    highest = ctx.op.ReduceMax(set_positions, ctx.i64([-1]), keepdims=0)
    return ctx.cast(ctx.op.Sub(width - 1, highest), dtype)

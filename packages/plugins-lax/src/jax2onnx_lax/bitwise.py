"""lax logical/bitwise ops: and, or, xor, not (bool: logic ops; ints: Bitwise*), the three shifts,
population_count and clz.

onnxruntime's BitShift only has unsigned kernels, so signed ints shift in the unsigned type of the
same width: Cast between them is a two's-complement reinterpretation (modular, both ways).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.dtypes import I32, bits, is_bool, unsigned_of
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import _numeric as nm
from ._testdata import ints

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


# ---------------------------------------------------------------------------------------------
# Testcases


def _spec(*shape, dtype=jnp.int32):
    return jax.ShapeDtypeStruct(shape, dtype)


_BOOL2 = [_spec("B", 4, dtype=jnp.bool_)] * 2
_INT2 = [_spec("B", 4)] * 2
_MIXED = ints(-2**31, 2**31 - 1)
_EDGE_X = np.array([1, 1, 1, 1, -1, -8, -8, 8, 2**31 - 1, -2**31], np.int32)
_EDGE_N = np.array([0, 31, 32, -1, 33, 1, 40, 3, 30, 31], np.int32)


def _logical_component(prim, bool_op, int_op):
    fn = getattr(lax, f"bitwise_{prim}")
    n = 1 if prim == "not" else 2
    return Component(f"lax.{prim}", onnx=[bool_op, int_op], since="v0.7.0", testcases=[
        Testcase(f"{prim}_bool", fn, _BOOL2[:n], expected_ops=[bool_op]),
        Testcase(f"{prim}_int32", fn, _INT2[:n], expected_ops=[int_op], input_generator=_MIXED),
        Testcase(f"{prim}_uint8", fn, [_spec("B", 4, dtype=jnp.uint8)] * n, expected_ops=[int_op],
                 input_generator=ints(0, 256)),
    ])


def _shift_component(prim):
    fn = getattr(lax, prim)
    return Component(f"lax.{prim}", onnx=["BitShift"], since="v0.7.0", testcases=[
        Testcase(f"{prim}_int32", fn, [_spec("B", 6), _spec("B", 6)], expected_ops=["BitShift"],
                 input_generator=ints(-40, 40)),
        Testcase(f"{prim}_int32_edges", fn, input_values=[_EDGE_X, _EDGE_N], expected_ops=["BitShift"]),
        Testcase(f"{prim}_uint8", fn, [_spec("B", 6, dtype=jnp.uint8)] * 2, input_generator=ints(0, 256)),
        Testcase(f"{prim}_int64", fn, input_values=[_EDGE_X.astype(np.int64) * 3, _EDGE_N.astype(np.int64) * 2]),
    ])


components = [
    *[_logical_component(p, b, i) for p, (b, i) in LOGICAL.items()],
    *[_shift_component(p) for p in ("shift_left", "shift_right_logical", "shift_right_arithmetic")],
    Component("lax.population_count", onnx=["BitShift", "BitwiseAnd", "ReduceSum"], since="v0.7.0", testcases=[
        Testcase("population_count_int32", lax.population_count, [_spec("B", 4)], input_generator=_MIXED,
                 expected_ops=["BitShift", "ReduceSum"]),
        Testcase("population_count_uint8", lax.population_count, [_spec("B", 4, dtype=jnp.uint8)],
                 input_generator=ints(0, 256)),
    ]),
    Component("lax.clz", onnx=["BitShift", "ReduceMax"], since="v0.7.0", testcases=[
        Testcase("clz_int32", lax.clz, [_spec("B", 4)], input_generator=_MIXED, expected_ops=["ReduceMax"]),
        Testcase("clz_int32_edges", lax.clz, input_values=[np.array([0, 1, -1, 255, 2**30], np.int32)]),
        Testcase("clz_uint16", lax.clz, [_spec("B", 4, dtype=jnp.uint16)], input_generator=ints(0, 65536)),
    ]),
]

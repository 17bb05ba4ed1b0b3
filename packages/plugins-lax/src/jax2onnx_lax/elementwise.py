"""lax elementwise arithmetic: one-to-one ops are a table; the rest are small functions.

Every operand has the same dtype (lax inserts ``convert_element_type``), so the equation's first
input aval decides the dtype. Each lowering names the dtypes its ONNX op has onnxruntime kernels for
(``register(..., dtypes=...)``); core computes other dtypes in a wider exact carrier: bfloat16/float16
in float32, narrow ints in int32.
"""

from __future__ import annotations

import numpy as np
from jax import lax
from jax2onnx.dtypes import FLOAT_MATH, HALF_FLOATS, is_int, is_unsigned
from jax2onnx.fusion import const_array
from jax2onnx.plugin import Kernels, Lowerings

from . import _numeric as nm
from . import complex_pairs as cp

lowerings = Lowerings()

#: lax primitive -> (ONNX op, the dtypes it computes in: the op's onnxruntime kernels, or
#: FLOAT_MATH's JAX semantics). The semantics match exactly: lax has explicit broadcasting, ONNX
#: Max/Min propagate NaN like XLA (checked by the max/min NaN cases).
ONE_TO_ONE: dict[str, tuple[str, frozenset | Kernels]] = {
    "add": ("Add", Kernels("Add")),
    "add_any": ("Add", Kernels("Add")),  # the cotangent sum of reverse-mode autodiff
    "sub": ("Sub", Kernels("Sub")),
    "mul": ("Mul", Kernels("Mul")),
    "max": ("Max", Kernels("Max")),
    "min": ("Min", Kernels("Min")),
    "abs": ("Abs", Kernels("Abs")),
    # the table records onnxruntime's float16 Sign as inexact (0 for NaN): float16 computes in float32
    "sign": ("Sign", Kernels("Sign")),
    "floor": ("Floor", FLOAT_MATH),
    "ceil": ("Ceil", FLOAT_MATH),
    "exp": ("Exp", FLOAT_MATH),
    "log": ("Log", FLOAT_MATH),
    "sqrt": ("Sqrt", FLOAT_MATH),
    "tanh": ("Tanh", FLOAT_MATH),
    "logistic": ("Sigmoid", FLOAT_MATH),
    "sin": ("Sin", FLOAT_MATH),
    "cos": ("Cos", FLOAT_MATH),
}


def one_to_one(op_type: str):
    """The lowering of a primitive that is the ONNX op ``op_type`` on the same operands."""

    def lower(ctx, *xs):
        return getattr(ctx.op, op_type)(*xs)

    lower.__name__ = f"lower_{op_type.lower()}"
    return lower


# Complex operands are (real, imag) pairs; complex_pairs has the formulas (or names the primitive
# it has none for).
for _prim, (_op, _types) in ONE_TO_ONE.items():
    lowerings.add(_prim, one_to_one(_op), dtypes=_types, complex=cp.lower_elementwise)


@lowerings.register("neg", dtypes="Sub", complex=cp.lower_elementwise)
def lower_neg(ctx, x):
    if is_unsigned(ctx.avals_in[0].dtype):  # no unsigned Neg kernel; 0 - x wraps exactly like XLA
        return ctx.op.Sub(ctx.const(0, ctx.avals_in[0].dtype), x)
    return ctx.op.Neg(x)


@lowerings.register("square", dtypes="Mul", complex=cp.lower_elementwise)
def lower_square(ctx, x):
    return ctx.op.Mul(x, x)


@lowerings.register("rsqrt", dtypes=FLOAT_MATH, complex=cp.unsupported)
def lower_rsqrt(ctx, x):
    return ctx.op.Reciprocal(ctx.op.Sqrt(x))


@lowerings.register("exp2", dtypes=FLOAT_MATH, complex=cp.unsupported)
def lower_exp2(ctx, x):
    return ctx.op.Pow(ctx.const(2, ctx.avals_in[0].dtype), x)


@lowerings.register("pow", dtypes=Kernels("Pow", without=HALF_FLOATS), complex=cp.unsupported)
def lower_pow(ctx, x, y):
    """ONNX Pow allows an exponent dtype other than the base's (lax.pow(float, int)); each operand
    travels in its own carrier."""
    return ctx.op.Pow(x, y)


@lowerings.register("integer_pow", dtypes=Kernels(("Mul", "Div")), complex=cp.lower_elementwise)
def lower_integer_pow(ctx, x):
    """Square-and-multiply with Mul, then 1/acc for negative powers: the same products JAX's own
    lowering forms, so the rounding matches too (Pow would round differently)."""
    y = int(ctx.params["y"])
    if y == 0:
        return ctx.op.Expand(ctx.const(1, ctx.avals_in[0].dtype), ctx.op.Shape(x))
    n, acc, base = abs(y), None, x
    while n:
        if n & 1:
            acc = base if acc is None else ctx.op.Mul(acc, base)
        n >>= 1
        if n:
            base = ctx.op.Mul(base, base)
    return ctx.op.Div(1, acc) if y < 0 else acc


def _int_guard(ctx, y, dtype):
    """(y == 0, y == -1, divisor with those replaced by 1), or None when the divisor is a constant
    without them. onnxruntime traps on x/0 and INT_MIN/-1 (SIGFPE); XLA defines both."""
    value = const_array(y)
    signed = not is_unsigned(dtype)
    if value is not None and np.all(value != 0) and (not signed or np.all(value != -1)):
        return None
    is_zero = ctx.op.Equal(y, 0)
    is_minus_one = ctx.op.Equal(y, -1) if signed else None
    unsafe = ctx.op.Or(is_zero, is_minus_one) if signed else is_zero
    safe = nm.where(ctx, unsafe, ctx.const(1, dtype), y, dtype)
    return is_zero, is_minus_one, safe


@lowerings.register("div", dtypes="Div", complex=cp.lower_elementwise)
def lower_div(ctx, x, y):
    """Floats: Div. Ints: Div truncates toward zero like lax.div; x/0 gives -1 (all bits set) and
    INT_MIN/-1 gives INT_MIN, as in XLA."""
    dtype = nm.dtype_of(ctx.avals_in[0])
    if not is_int(dtype):
        return ctx.op.Div(x, y)
    guard = _int_guard(ctx, y, dtype)
    if guard is None:
        return ctx.op.Div(x, y)
    is_zero, is_minus_one, safe = guard
    q = ctx.op.Div(x, safe)
    if is_minus_one is not None:  # x / -1 == -x, wrapping at INT_MIN
        q = nm.where(ctx, is_minus_one, ctx.op.Sub(ctx.const(0, dtype), x), q, dtype)
    all_ones = ctx.const(np.iinfo(dtype).max if is_unsigned(dtype) else -1, dtype)
    return nm.where(ctx, is_zero, all_ones, q, dtype)


def _truncated_mod(ctx, x, y, dtype):
    """x - trunc(x / y) * y (the sign of x). ONNX Mod with fmod=1 says exactly that, but onnxruntime
    before 1.32 computes fmod=1 on 64-bit ints through double and loses the low bits (a uint64
    randint under x64 came out wrong on 1.31); so unsigned ints take fmod=0 (the same for them) and
    64-bit signed ints Div, Mul, Sub (Div truncates, as lax.div does)."""
    if is_unsigned(dtype):
        return ctx.op.Mod(x, y)
    if is_int(dtype) and np.dtype(dtype).itemsize == 8:
        return ctx.op.Sub(x, ctx.op.Mul(ctx.op.Div(x, y), y))
    return ctx.op.Mod(x, y, fmod=1)


@lowerings.register("rem", dtypes="Mod", complex=cp.unsupported)
def lower_rem(ctx, x, y):
    """C fmod semantics (the sign of x). x % 0 gives x and INT_MIN % -1 gives 0 as in XLA (the
    divisor -1 becomes 1, whose remainder is 0)."""
    dtype = nm.dtype_of(ctx.avals_in[0])
    guard = _int_guard(ctx, y, dtype) if is_int(dtype) else None
    if guard is None:
        return _truncated_mod(ctx, x, y, dtype)
    is_zero, _, safe = guard
    return nm.where(ctx, is_zero, x, _truncated_mod(ctx, x, safe, dtype), dtype)


@lowerings.register("round", dtypes=FLOAT_MATH, complex=cp.unsupported)
def lower_round(ctx, x):
    """TO_NEAREST_EVEN is ONNX Round. AWAY_FROM_ZERO: floor(|x|), plus one when the exact fraction
    |x| - floor(|x|) is >= 0.5 (floor(|x| + 0.5) would round 0.49999997 up), sign restored."""
    op = ctx.op
    if int(ctx.params.get("rounding_method", 0)) == int(lax.RoundingMethod.TO_NEAREST_EVEN):
        return op.Round(x)
    a = op.Abs(x)
    f = op.Floor(a)
    r = op.Where(op.GreaterOrEqual(op.Sub(a, f), 0.5), op.Add(f, 1), f)
    return op.Where(op.Less(x, 0), op.Neg(r), r)


@lowerings.register("clamp", dtypes="Max", complex=cp.unsupported)
def lower_clamp(ctx, lo, x, hi):
    """lax.clamp is min(max(x, lo), hi), NaN anywhere giving NaN. ONNX Clip ignores a NaN bound, so
    it is used only for constant, non-NaN scalar bounds, on dtypes the target's Clip computes
    exactly (Max/Min give the same values elsewhere)."""
    lo_v, hi_v = const_array(lo), const_array(hi)
    scalar_bounds = ctx.avals_in[0].shape == () and ctx.avals_in[2].shape == ()
    constant_bounds = lo_v is not None and hi_v is not None and not (np.isnan(lo_v).any() or np.isnan(hi_v).any())
    if scalar_bounds and constant_bounds and nm.dtype_of(ctx.avals_in[1]) in ctx.kernel_dtypes("Clip", exact=True):
        return ctx.op.Clip(x, lo, hi)
    return ctx.op.Min(ctx.op.Max(x, lo), hi)


# float16/bfloat16 widen exactly, inf and NaN included
@lowerings.register("is_finite", dtypes=FLOAT_MATH, complex=cp.unsupported)
def lower_is_finite(ctx, x):
    return ctx.op.Not(ctx.op.Or(ctx.op.IsInf(x), ctx.op.IsNaN(x)))

"""lax elementwise arithmetic: one-to-one ops are a table; the rest are small functions.

Every operand has the same dtype (lax inserts ``convert_element_type``), so the equation's first
input aval decides the dtype. Each lowering names the dtypes its ONNX op has onnxruntime kernels for
(``register(..., dtypes=...)``); core computes other dtypes in a wider exact carrier: bfloat16/float16
in float32, narrow ints in int32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.dtypes import ARITH, F16, FLOAT_MATH, MINMAX, POW, is_int, is_unsigned
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import _numeric as nm
from . import complex_pairs as cp
from ._testdata import SPECIAL, f32, halves, ints, uniform

lowerings = Lowerings()

#: lax primitive -> (ONNX op, dtypes onnxruntime runs it on). The semantics match exactly: lax has
#: explicit broadcasting, ONNX Max/Min propagate NaN like XLA (checked by the max/min NaN cases).
ONE_TO_ONE: dict[str, tuple[str, frozenset]] = {
    "add": ("Add", ARITH),
    "add_any": ("Add", ARITH),  # the cotangent sum of reverse-mode autodiff
    "sub": ("Sub", ARITH),
    "mul": ("Mul", ARITH),
    "max": ("Max", MINMAX),
    "min": ("Min", MINMAX),
    "abs": ("Abs", ARITH),
    "sign": ("Sign", ARITH - {F16}),  # onnxruntime's float16 Sign gives 0 for NaN: float32 keeps it
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


@lowerings.register("neg", dtypes=ARITH, complex=cp.lower_elementwise)
def lower_neg(ctx, x):
    if is_unsigned(ctx.avals_in[0].dtype):  # no unsigned Neg kernel; 0 - x wraps exactly like XLA
        return ctx.op.Sub(ctx.const(0, ctx.avals_in[0].dtype), x)
    return ctx.op.Neg(x)


@lowerings.register("square", dtypes=ARITH, complex=cp.lower_elementwise)
def lower_square(ctx, x):
    return ctx.op.Mul(x, x)


@lowerings.register("rsqrt", dtypes=FLOAT_MATH, complex=cp.unsupported)
def lower_rsqrt(ctx, x):
    return ctx.op.Reciprocal(ctx.op.Sqrt(x))


@lowerings.register("exp2", dtypes=FLOAT_MATH, complex=cp.unsupported)
def lower_exp2(ctx, x):
    return ctx.op.Pow(ctx.const(2, ctx.avals_in[0].dtype), x)


@lowerings.register("pow", dtypes=POW, complex=cp.unsupported)
def lower_pow(ctx, x, y):
    """ONNX Pow allows an exponent dtype other than the base's (lax.pow(float, int)); each operand
    travels in its own carrier."""
    return ctx.op.Pow(x, y)


@lowerings.register("integer_pow", dtypes=ARITH, complex=cp.lower_elementwise)
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
    value = nm.const_value(y)
    signed = not is_unsigned(dtype)
    if value is not None and np.all(value != 0) and (not signed or np.all(value != -1)):
        return None
    is_zero = ctx.op.Equal(y, 0)
    is_minus_one = ctx.op.Equal(y, -1) if signed else None
    unsafe = ctx.op.Or(is_zero, is_minus_one) if signed else is_zero
    safe = nm.where(ctx, unsafe, ctx.const(1, dtype), y, dtype)
    return is_zero, is_minus_one, safe


@lowerings.register("div", dtypes=ARITH, complex=cp.lower_elementwise)
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


@lowerings.register("rem", dtypes=ARITH, complex=cp.unsupported)
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


@lowerings.register("clamp", dtypes=MINMAX, complex=cp.unsupported)
def lower_clamp(ctx, lo, x, hi):
    """lax.clamp is min(max(x, lo), hi), NaN anywhere giving NaN. ONNX Clip ignores a NaN bound, so
    it is used only for constant, non-NaN scalar bounds (and not for float16, which Clip has no
    kernel for; Max/Min give the same values)."""
    lo_v, hi_v = nm.const_value(lo), nm.const_value(hi)
    scalar_bounds = ctx.avals_in[0].shape == () and ctx.avals_in[2].shape == ()
    constant_bounds = lo_v is not None and hi_v is not None and not (np.isnan(lo_v).any() or np.isnan(hi_v).any())
    if scalar_bounds and constant_bounds and nm.dtype_of(ctx.avals_in[1]) != F16:
        return ctx.op.Clip(x, lo, hi)
    return ctx.op.Min(ctx.op.Max(x, lo), hi)


# float16/bfloat16 widen exactly, inf and NaN included
@lowerings.register("is_finite", dtypes=FLOAT_MATH, complex=cp.unsupported)
def lower_is_finite(ctx, x):
    return ctx.op.Not(ctx.op.Or(ctx.op.IsInf(x), ctx.op.IsNaN(x)))


# ---------------------------------------------------------------------------------------------
# Testcases

_I32 = jnp.int32
_U8 = jnp.uint8


def _int_spec(*shape, dtype=_I32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _unary(prim, fn, *, ops, gen=None, since="v0.7.0", extra=()):
    cases = [Testcase(prim, fn, [("B", 4)], expected_ops=ops, input_generator=gen)]
    return Component(f"lax.{prim}", onnx=ops, since=since, testcases=cases + list(extra))


_SPECIAL_CASE = dict(input_values=[SPECIAL])
_NAN_PAIRS = [f32(1.0, np.nan, 3.0, np.nan, -0.0), f32(np.nan, 2.0, 1.0, np.nan, 0.0)]

components = [
    Component("lax.add", onnx=["Add"], since="v0.2.0", testcases=[
        Testcase("add", lax.add, [("B", 3), ("B", 3)], expected_ops=["Add"]),
        Testcase("add_any_under_grad", jax.grad(lambda x: jnp.sum(jnp.sin(x) * x)), [("B", 3)], expected_ops=["Add"]),
        Testcase("add_int32", lax.add, [_int_spec("B", 3), _int_spec("B", 3)], expected_ops=["Add"]),
        Testcase("add_uint8_wraps", lambda x: x + _U8(250), [_int_spec("B", 3, dtype=_U8)], expected_ops=["Add"]),
        # computed in float32 and rounded once: exactly XLA's bfloat16 sum
        Testcase("add_bfloat16", lambda x, y: lax.add(x.astype(jnp.bfloat16), y.astype(jnp.bfloat16)).astype(x.dtype),
                 [("B", 3), ("B", 3)], expected_ops=["Add"], rtol=0, atol=0, rtol_f64=0, atol_f64=0,
                 reference_jit=False),  # jitted, XLA fuses the f32->bf16->f32 round trip away
    ]),
    Component("lax.sub", onnx=["Sub"], since="v0.1.0", testcases=[
        Testcase("sub_test1", lax.sub, [("B", 3), ("B", 3)], expected_ops=["Sub"]),
        Testcase("sub_test2", lambda x: lax.sub(x, 2.5), [("B", 2, 2)], expected_ops=["Sub"]),
        Testcase("sub_int32", lax.sub, [_int_spec("B", 3), _int_spec("B", 3)], expected_ops=["Sub"]),
    ]),
    Component("lax.mul", onnx=["Mul"], since="v0.1.0", testcases=[
        Testcase("mul_test1", lax.mul, [("B", 3), ("B", 3)], expected_ops=["Mul"]),
        Testcase("mul_test2", lambda x: lax.mul(x, 3.0), [("B", 2, 2)], expected_ops=["Mul"]),
        Testcase("mul_int32", lax.mul, [_int_spec("B", 3), _int_spec("B", 3)], expected_ops=["Mul"],
                 input_generator=ints(-100000, 100000)),
    ]),
    Component("lax.div", onnx=["Div"], since="v0.2.0", testcases=[
        Testcase("div", lax.div, [("B", 3), ("B", 3)], expected_ops=["Div"]),
        # negative operands and zero divisors: truncation toward zero, x/0 == -1
        Testcase("div_int32", lax.div, [_int_spec("B", 8), _int_spec("B", 8)], expected_ops=["Div", "Where"],
                 input_generator=ints(-7, 8)),
        Testcase("div_int32_edge", lax.div, input_values=[np.array([7, -7, 7, -7, 5, -2**31, 0], np.int32),
                                                           np.array([2, 2, -2, -2, 0, -1, 0], np.int32)]),
        Testcase("div_uint32_by_zero", lax.div, input_values=[np.array([7, 5, 9], np.uint32), np.array([0, 2, 4],
                                                                                                       np.uint32)]),
        # a constant non-zero divisor needs no guard
        Testcase("div_int32_by_constant", lambda x: lax.div(x, _I32(3)), [_int_spec("B", 4)], expected_ops=["Div"],
                 forbidden_ops=["Where"], input_generator=ints(-20, 20)),
        Testcase("floor_divide_int32", jnp.floor_divide, [_int_spec("B", 6), _int_spec("B", 6)],
                 input_generator=ints(-7, 8), expected_ops=["Div"]),
    ]),
    Component("lax.rem", onnx=["Mod"], since="v0.7.0", testcases=[
        Testcase("rem", lax.rem, [("B", 4), ("B", 4)], expected_ops=["Mod"]),
        Testcase("rem_int32", lax.rem, [_int_spec("B", 8), _int_spec("B", 8)], expected_ops=["Mod"],
                 input_generator=ints(-7, 8)),
        Testcase("rem_int32_edge", lax.rem, input_values=[np.array([7, -7, 7, -7, 5, -2**31], np.int32),
                                                           np.array([2, 2, -2, -2, 0, -1], np.int32)]),
        # 64-bit values beyond double's 53-bit mantissa: onnxruntime < 1.32 got these wrong with fmod=1
        Testcase("rem_int64_large", lax.rem,
                 input_values=[np.array([2**62 + 12345, -(2**62) - 9, 2**63 - 1, -(2**63), 7, -7], np.int64),
                               np.array([1007, 1007, -1007, 3, 0, -1], np.int64)]),
        Testcase("rem_uint64_large", lax.rem,
                 input_values=[np.array([2**64 - 1, 2**63 + 12345, 17592175208530790032, 5], np.uint64),
                               np.array([1007, 1007, 1007, 0], np.uint64)]),
        Testcase("remainder_jnp_int32", jnp.remainder, [_int_spec("B", 6), _int_spec("B", 6)],
                 input_generator=ints(-7, 8),
                 expected_ops=["Mod"]),
    ]),
    Component("lax.neg", onnx=["Neg"], since="v0.2.0", testcases=[
        Testcase("neg", lax.neg, [("B", 3)], expected_ops=["Neg"]),
        Testcase("neg_int32", lax.neg, [_int_spec("B", 3)], expected_ops=["Neg"], input_generator=ints(-9, 9)),
        Testcase("neg_uint8", lax.neg, [_int_spec("B", 3, dtype=_U8)], expected_ops=["Sub"]),
    ]),
    Component("lax.abs", onnx=["Abs"], since="v0.5.0", testcases=[
        Testcase("abs", lax.abs, [("B", 3)], expected_ops=["Abs"]),
        Testcase("abs_int32", lax.abs, [_int_spec("B", 3)], expected_ops=["Abs"], input_generator=ints(-9, 9)),
    ]),
    Component("lax.sign", onnx=["Sign"], since="v0.5.0", testcases=[
        Testcase("sign", lax.sign, [("B", 3)], expected_ops=["Sign"]),
        Testcase("sign_special_values", lax.sign, expected_ops=["Sign"], **_SPECIAL_CASE),
        Testcase("sign_int32", lax.sign, [_int_spec("B", 3)], expected_ops=["Sign"], input_generator=ints(-9, 9)),
        # float16 NaN stays NaN (onnxruntime's float16 Sign gives 0: computed in float32)
        Testcase("sign_float16_nan", lax.sign,
                 input_values=[np.asarray([np.nan, -np.inf, np.inf, -0.0, 1.5, -2.0], np.float16)]),
    ]),
    Component("lax.max", onnx=["Max"], since="v0.2.0", testcases=[
        Testcase("max", lax.max, [("B", 3), ("B", 3)], expected_ops=["Max"]),
        Testcase("max_nan_propagates", lax.max, input_values=_NAN_PAIRS, expected_ops=["Max"]),
        Testcase("max_int16", lax.max, [_int_spec("B", 3, dtype=jnp.int16)] * 2, expected_ops=["Max"],
                 input_generator=ints(-9, 9)),
    ]),
    Component("lax.min", onnx=["Min"], since="v0.1.0", testcases=[
        Testcase("min_test1", lax.min, [("B", 3), ("B", 3)], expected_ops=["Min"]),
        Testcase("min_nan_propagates", lax.min, input_values=_NAN_PAIRS, expected_ops=["Min"]),
        Testcase("min_int32", lax.min, [_int_spec("B", 3)] * 2, expected_ops=["Min"], input_generator=ints(-9, 9)),
    ]),
    _unary("exp", lax.exp, ops=["Exp"], since="v0.2.0"),
    _unary("log", lax.log, ops=["Log"], gen=uniform(0.01, 5.0), since="v0.2.0"),
    _unary("sqrt", lax.sqrt, ops=["Sqrt"], gen=uniform(0.0, 5.0), since="v0.2.0"),
    _unary("rsqrt", lax.rsqrt, ops=["Sqrt", "Reciprocal"], gen=uniform(0.01, 5.0)),
    _unary("tanh", lax.tanh, ops=["Tanh"], since="v0.2.0"),
    _unary("logistic", lax.logistic, ops=["Sigmoid"]),
    _unary("sin", lax.sin, ops=["Sin"], since="v0.4.4"),
    _unary("cos", lax.cos, ops=["Cos"], since="v0.4.4"),
    _unary("floor", lax.floor, ops=["Floor"]),
    _unary("ceil", lax.ceil, ops=["Ceil"]),
    _unary("exp2", lax.exp2, ops=["Pow"]),
    _unary("square", lax.square, ops=["Mul"], since="v0.2.0",
           extra=[Testcase("square_int32", lax.square, [_int_spec("B", 3)], expected_ops=["Mul"],
                           input_generator=ints(-9, 9))]),
    Component("lax.round", onnx=["Round", "Floor", "Where"], since="v0.7.0", testcases=[
        Testcase("round_away_from_zero", lax.round, [("B", 8)], input_generator=halves, expected_ops=["Floor"]),
        Testcase("round_to_nearest_even", lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), [("B", 8)],
                 input_generator=halves, expected_ops=["Round"]),
        Testcase("round_away_from_zero_edges", lax.round, input_values=[f32(0.49999997, -0.49999997, 8388609.0, 2.5,
                                                                            -2.5, 1e30,
                                                                            np.inf, np.nan)], expected_ops=["Floor"]),
        Testcase("round_float16", lambda x: lax.round(x.astype(jnp.float16)).astype(x.dtype), [("B", 8)],
                 input_generator=halves),
    ]),
    Component("lax.integer_pow", onnx=["Mul", "Div"], since="v0.2.0", testcases=[
        Testcase("integer_pow", lambda x: lax.integer_pow(x, 3), [("B", 3)], expected_ops=["Mul"]),
        Testcase("integer_pow_negative", lambda x: lax.integer_pow(x, -2), [("B", 3)], expected_ops=["Mul", "Div"],
                 input_generator=uniform(0.5, 2.0)),
        Testcase("integer_pow_zero", lambda x: lax.integer_pow(x, 0), input_values=[f32(1.0, np.nan, np.inf)]),
        Testcase("integer_pow_seven_int32", lambda x: lax.integer_pow(x, 7), [_int_spec("B", 3)], expected_ops=["Mul"],
                 input_generator=ints(-9, 9)),
    ]),
    Component("lax.pow", onnx=["Pow"], since="v0.7.0", testcases=[
        Testcase("pow", lax.pow, [("B", 3), ("B", 3)], expected_ops=["Pow"], input_generator=uniform(0.1, 3.0)),
        Testcase("pow_float_int_exponent", lambda x, n: lax.pow(x, n), [("B", 3), _int_spec("B", 3)],
                 expected_ops=["Pow"]),
    ]),
    Component("lax.clamp", onnx=["Clip", "Max", "Min"], since="v0.7.0", testcases=[
        Testcase("clamp_constant_bounds", lambda x: lax.clamp(-0.5, x, 0.5), [("B", 4)], expected_ops=["Clip"]),
        Testcase("clamp_tensor_bounds", lax.clamp, [("B", 4)] * 3, expected_ops=["Max", "Min"]),
        Testcase("clamp_nan", lambda x: lax.clamp(-0.5, x, 0.5), input_values=[f32(np.nan, 1.0, -1.0, 0.25)]),
        Testcase("clamp_int32", lambda x: lax.clamp(_I32(-3), x, _I32(3)), [_int_spec("B", 4)],
                 input_generator=ints(-9, 9)),
    ]),
    Component("lax.is_finite", onnx=["IsInf", "IsNaN", "Or", "Not"], since="v0.7.0", testcases=[
        Testcase("is_finite", lax.is_finite, expected_ops=["IsInf", "IsNaN"], **_SPECIAL_CASE),
        Testcase("is_finite_random", lax.is_finite, [("B", 3)], expected_ops=["IsInf"]),
    ]),
]

"""lax elementwise arithmetic: one-to-one ops are a table; the rest are small functions.

Every operand has the same dtype (lax inserts ``convert_element_type``), so the equation's first
input aval decides the dtype. Dtypes onnxruntime has no kernel for are computed in a wider exact
carrier (``_numeric.compute_in``): bfloat16/float16 in float32, narrow ints in int32.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import _numeric as nm
from . import complex_pairs as cp
from ._testdata import SPECIAL, f32, halves, ints, uniform

lowerings = Lowerings()

#: lax primitive -> (ONNX op, dtypes onnxruntime runs it on). The semantics match exactly: lax has
#: explicit broadcasting, ONNX Max/Min propagate NaN like XLA (checked by the max/min NaN cases).
ONE_TO_ONE: dict[str, tuple[str, frozenset]] = {
    "add": ("Add", nm.ARITH),
    "add_any": ("Add", nm.ARITH),  # the cotangent sum of reverse-mode autodiff
    "sub": ("Sub", nm.ARITH),
    "mul": ("Mul", nm.ARITH),
    "max": ("Max", nm.MINMAX),
    "min": ("Min", nm.MINMAX),
    "abs": ("Abs", nm.ARITH),
    "sign": ("Sign", nm.ARITH),
    "floor": ("Floor", nm.FLOAT_MATH),
    "ceil": ("Ceil", nm.FLOAT_MATH),
    "exp": ("Exp", nm.FLOAT_MATH),
    "log": ("Log", nm.FLOAT_MATH),
    "sqrt": ("Sqrt", nm.FLOAT_MATH),
    "tanh": ("Tanh", nm.FLOAT_MATH),
    "logistic": ("Sigmoid", nm.FLOAT_MATH),
    "sin": ("Sin", nm.FLOAT_MATH),
    "cos": ("Cos", nm.FLOAT_MATH),
}


def _one_to_one(op_type: str, supported: frozenset):
    def lower(ctx, *xs):
        if cp.is_complex(ctx.avals_in[0]):  # (real, imag) pairs: complex_pairs has the formulas
            return cp.lower_elementwise(ctx, xs)
        return nm.compute_in(ctx, xs, nm.dtype_of(ctx.avals_in[0]), supported,
                             lambda _c, *ys: getattr(ctx.op, op_type)(*ys))

    lower.__name__ = f"lower_{op_type.lower()}"
    return lower


for _prim, (_op, _types) in ONE_TO_ONE.items():
    lowerings.add(_prim, _one_to_one(_op, _types))


@lowerings.register("neg")
def lower_neg(ctx, x):
    if cp.is_complex(ctx.avals_in[0]):
        return cp.lower_elementwise(ctx, [x])
    dtype = nm.dtype_of(ctx.avals_in[0])
    if nm.is_unsigned(dtype):  # no unsigned Neg kernel; 0 - x wraps exactly like XLA
        return ctx.op.Sub(nm.const(ctx, 0, dtype), x)
    return nm.compute_in(ctx, [x], dtype, nm.ARITH, lambda _c, y: ctx.op.Neg(y))


@lowerings.register("square")
def lower_square(ctx, x):
    if cp.is_complex(ctx.avals_in[0]):
        return cp.lower_elementwise(ctx, [x])
    return nm.compute_in(ctx, [x], nm.dtype_of(ctx.avals_in[0]), nm.ARITH, lambda _c, y: ctx.op.Mul(y, y))


@lowerings.register("rsqrt")
def lower_rsqrt(ctx, x):
    return nm.compute_in(ctx, [x], nm.dtype_of(ctx.avals_in[0]), nm.FLOAT_MATH,
                         lambda _c, y: ctx.op.Reciprocal(ctx.op.Sqrt(y)))


@lowerings.register("exp2")
def lower_exp2(ctx, x):
    return nm.compute_in(ctx, [x], nm.dtype_of(ctx.avals_in[0]), nm.FLOAT_MATH,
                         lambda c, y: ctx.op.Pow(nm.const(ctx, 2, c), y))


@lowerings.register("pow")
def lower_pow(ctx, x, y):
    """ONNX Pow allows an exponent dtype other than the base's (lax.pow(float, int))."""
    base, expo = nm.dtype_of(ctx.avals_in[0]), nm.dtype_of(ctx.avals_in[1])
    if expo == base:
        return nm.compute_in(ctx, [x, y], base, nm.POW, lambda _c, a, b: ctx.op.Pow(a, b))
    y = nm.cast_if(ctx, y, expo, nm.carrier(expo, nm.POW))
    return nm.compute_in(ctx, [x], base, nm.POW, lambda _c, a: ctx.op.Pow(a, y))


@lowerings.register("integer_pow")
def lower_integer_pow(ctx, x):
    """Square-and-multiply with Mul, then 1/acc for negative powers: the same products JAX's own
    lowering forms, so the rounding matches too (Pow would round differently)."""
    if cp.is_complex(ctx.avals_in[0]):
        return cp.lower_elementwise(ctx, [x])
    dtype = nm.dtype_of(ctx.avals_in[0])
    y = int(ctx.params["y"])

    def power(c, base):
        if y == 0:
            return ctx.op.Expand(nm.const(ctx, 1, c), ctx.op.Shape(base))
        n, acc = abs(y), None
        while n:
            if n & 1:
                acc = base if acc is None else ctx.op.Mul(acc, base)
            n >>= 1
            if n:
                base = ctx.op.Mul(base, base)
        return ctx.op.Div(nm.const(ctx, 1, c), acc) if y < 0 else acc

    return nm.compute_in(ctx, [x], dtype, nm.ARITH, power)


def _int_guard(ctx, y, dtype):
    """(y == 0, y == -1, divisor with those replaced by 1), or None when the divisor is a constant
    without them. onnxruntime traps on x/0 and INT_MIN/-1 (SIGFPE); XLA defines both."""
    value = nm.const_value(y)
    signed = not nm.is_unsigned(dtype)
    if value is not None and np.all(value != 0) and (not signed or np.all(value != -1)):
        return None
    is_zero = ctx.op.Equal(y, nm.const(ctx, 0, dtype))
    is_minus_one = ctx.op.Equal(y, nm.const(ctx, -1, dtype)) if signed else None
    unsafe = ctx.op.Or(is_zero, is_minus_one) if signed else is_zero
    safe = nm.where(ctx, unsafe, nm.const(ctx, 1, dtype), y, dtype)
    return is_zero, is_minus_one, safe


@lowerings.register("div")
def lower_div(ctx, x, y):
    """Floats: Div. Ints: Div truncates toward zero like lax.div; x/0 gives -1 (all bits set) and
    INT_MIN/-1 gives INT_MIN, as in XLA."""
    if cp.is_complex(ctx.avals_in[0]):
        return cp.lower_elementwise(ctx, [x, y])
    dtype = nm.dtype_of(ctx.avals_in[0])
    if not nm.is_int(dtype):
        return nm.compute_in(ctx, [x, y], dtype, nm.ARITH, lambda _c, a, b: ctx.op.Div(a, b))
    guard = _int_guard(ctx, y, dtype)
    if guard is None:
        return ctx.op.Div(x, y)
    is_zero, is_minus_one, safe = guard
    q = ctx.op.Div(x, safe)
    if is_minus_one is not None:  # x / -1 == -x, wrapping at INT_MIN
        q = nm.where(ctx, is_minus_one, ctx.op.Sub(nm.const(ctx, 0, dtype), x), q, dtype)
    all_ones = nm.const(ctx, np.iinfo(dtype).max if nm.is_unsigned(dtype) else -1, dtype)
    return nm.where(ctx, is_zero, all_ones, q, dtype)


@lowerings.register("rem")
def lower_rem(ctx, x, y):
    """C fmod semantics (the sign of x): ONNX Mod with fmod=1, for ints too. x % 0 gives x and
    INT_MIN % -1 gives 0 as in XLA (the divisor -1 becomes 1, whose remainder is 0)."""
    dtype = nm.dtype_of(ctx.avals_in[0])
    if not nm.is_int(dtype):
        return nm.compute_in(ctx, [x, y], dtype, nm.ARITH, lambda _c, a, b: ctx.op.Mod(a, b, fmod=1))
    guard = _int_guard(ctx, y, dtype)
    if guard is None:
        return ctx.op.Mod(x, y, fmod=1)
    is_zero, _, safe = guard
    return nm.where(ctx, is_zero, x, ctx.op.Mod(x, safe, fmod=1), dtype)


@lowerings.register("round")
def lower_round(ctx, x):
    """TO_NEAREST_EVEN is ONNX Round. AWAY_FROM_ZERO: floor(|x|), plus one when the exact fraction
    |x| - floor(|x|) is >= 0.5 (floor(|x| + 0.5) would round 0.49999997 up), sign restored."""
    dtype = nm.dtype_of(ctx.avals_in[0])
    if int(ctx.params.get("rounding_method", 0)) == int(lax.RoundingMethod.TO_NEAREST_EVEN):
        return nm.compute_in(ctx, [x], dtype, nm.FLOAT_MATH, lambda _c, y: ctx.op.Round(y))

    def away(c, y):
        a = ctx.op.Abs(y)
        f = ctx.op.Floor(a)
        up = ctx.op.GreaterOrEqual(ctx.op.Sub(a, f), nm.const(ctx, 0.5, c))
        r = ctx.op.Where(up, ctx.op.Add(f, nm.const(ctx, 1, c)), f)
        return ctx.op.Where(ctx.op.Less(y, nm.const(ctx, 0, c)), ctx.op.Neg(r), r)

    return nm.compute_in(ctx, [x], dtype, nm.FLOAT_MATH, away)


@lowerings.register("clamp")
def lower_clamp(ctx, lo, x, hi):
    """lax.clamp is min(max(x, lo), hi), NaN anywhere giving NaN. ONNX Clip ignores a NaN bound, so
    it is used only for constant, non-NaN scalar bounds."""
    dtype = nm.dtype_of(ctx.avals_in[1])
    lo_v, hi_v = nm.const_value(lo), nm.const_value(hi)
    scalar_bounds = ctx.avals_in[0].shape == () and ctx.avals_in[2].shape == ()
    constant_bounds = lo_v is not None and hi_v is not None and not (np.isnan(lo_v).any() or np.isnan(hi_v).any())
    if scalar_bounds and constant_bounds:
        clip_types = nm.MINMAX - {nm.F16}
        return nm.compute_in(ctx, [x, lo, hi], dtype, clip_types, lambda _c, a, b, c: ctx.op.Clip(a, b, c))
    return nm.compute_in(ctx, [x, lo, hi], dtype, nm.MINMAX, lambda _c, a, b, c: ctx.op.Min(ctx.op.Max(a, b), c))


@lowerings.register("is_finite")
def lower_is_finite(ctx, x):
    dtype = nm.dtype_of(ctx.avals_in[0])
    if dtype not in (nm.F32, nm.F64):  # float16/bfloat16 widen exactly, inf and NaN included
        x = nm.cast(ctx, x, nm.F32)
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
                 [("B", 3), ("B", 3)], expected_ops=["Add"], rtol=0, atol=0, rtol_f64=0, atol_f64=0),
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

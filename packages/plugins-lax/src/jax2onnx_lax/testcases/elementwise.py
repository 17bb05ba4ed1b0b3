"""Testcases of :mod:`jax2onnx_lax.elementwise` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.targets import default_target
from jax2onnx.testing import Component, Testcase
from jax2onnx.testing.runner import model_opset, op_types

from ._testdata import SPECIAL, f32, halves, ints, uniform

_I32 = jnp.int32


_U8 = jnp.uint8


def _int_spec(*shape, dtype=_I32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _neg_unsigned_form(model, variant):
    """lax.neg of an unsigned type: ``0 - x`` in the type itself where the opset's Sub has a kernel
    for it (uint8 from 14), else the interpreter's exact carrier (int32 at 13, where neither Sub nor
    Neg takes uint8) with Neg, cast back (the cast wraps as XLA's negation does)."""
    opset, ops = model_opset(model), op_types(model)
    if np.dtype(np.uint8) in default_target().runtime().dtypes("Sub", opset):
        assert "Sub" in ops and not {"Neg", "Cast"} & ops, f"{variant.id}: expected a uint8 Sub alone, got {sorted(ops)}"
    else:
        assert {"Cast", "Neg"} <= ops and "Sub" not in ops, f"{variant.id}: expected Neg on a carrier, got {sorted(ops)}"


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
        Testcase("neg_uint8", lax.neg, [_int_spec("B", 3, dtype=_U8)], check=_neg_unsigned_form),
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

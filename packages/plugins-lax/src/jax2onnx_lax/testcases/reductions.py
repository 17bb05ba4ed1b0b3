"""Testcases of :mod:`jax2onnx_lax.reductions` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ._testdata import f32, ints, spec


def _float_default():
    """float32, or float64 in the double-precision variants (evaluated while tracing)."""
    return jax.dtypes.canonicalize_dtype(jnp.float64)


def _standard_cases(name, jnp_fn, op, int_op=None):
    int_op = op if int_op is None else int_op
    return [
        Testcase(name, lambda x: jnp_fn(x, axis=1), [("B", 4)], expected_ops=[op]),
        Testcase(f"{name}_allaxes", jnp_fn, [("B", 4)], expected_ops=[op]),
        Testcase(f"{name}_keepdims", lambda x: jnp_fn(x, axis=0, keepdims=True), [("B", 4)], expected_ops=[op]),
        Testcase(f"{name}_int32", lambda x: jnp_fn(x, axis=(0, 2)), [spec("B", 2, 3)],
                 expected_ops=[int_op] if int_op else [], input_generator=ints(-5, 6)),
    ]


_NAN_ROWS = f32([1.0, np.nan, 3.0], [1.0, 2.0, np.nan], [np.nan, 2.0, 3.0], [2.0, 5.0, 5.0], [-np.inf, -np.inf, 1.0])


_BOOL = jnp.bool_


_U64_ROWS = np.asarray([[0, 2**63 + 5, 2**64 - 1, 7], [2**63, 1, 2**63 - 1, 2**62], [3, 2**63 + 1, 2**63, 9]], np.uint64)


def _bool_values(*rows):
    return [np.asarray(rows, dtype=bool)]


def _logical_cases(prim, fn, data_cases):
    cases = [Testcase(f"{prim}_{name}", fn, input_values=_bool_values(*rows)) for name, rows in data_cases]
    cases += [
        Testcase(f"{prim}_keepdims", lambda x: jnp.expand_dims(fn(x, axes=(1,)), 1), [spec("B", 5, dtype=_BOOL)]),
        Testcase(f"{prim}_int32_bits", lambda x: fn(x, axes=(0,)), [spec("B", 3)], input_generator=ints(-2**31,
                                                                                                         2**31 - 1)),
        Testcase(f"{prim}_uint8_bits", lambda x: fn(x, axes=(1,)), [spec("B", 4, dtype=jnp.uint8)],
                 input_generator=ints(0, 256)),
    ]
    return cases


def _logical(prim):
    return lambda x, axes=(0, 1): getattr(lax, f"{prim}_p").bind(x, axes=tuple(axes))


components = [
    Component("lax.reduce_sum", onnx=["ReduceSum"], since="v0.2.0", testcases=[
        *_standard_cases("reduce_sum", jnp.sum, "ReduceSum"),
        Testcase("reduce_sum_dtype", lambda x: jnp.sum(x, axis=0, dtype=_float_default()), [spec("B", 4)],
                 expected_ops=["ReduceSum", "Cast"]),
        Testcase("reduce_sum_uint8_wraps", lambda x: jnp.sum(x, axis=1, dtype=jnp.uint8), [spec("B", 8,
                                                                                                 dtype=jnp.uint8)],
                 input_generator=ints(0, 256)),
        Testcase("reduce_sum_float16", lambda x: jnp.sum(x.astype(jnp.float16), axis=1).astype(x.dtype), [("B", 8)],
                 rtol=1e-2, atol=1e-2, rtol_f64=1e-2, atol_f64=1e-2),
        Testcase("reduce_sum_no_axes", lambda x: lax.reduce_sum_p.bind(x, axes=()), [("B", 3)]),
        # int sums wrap like XLA (onnxruntime's integer ReduceSum adds in double and saturates):
        # over a symbolic axis (16-bit limbs), a static one, and int64/uint64 past 2**53
        Testcase("reduce_sum_int32_wraps", lambda x: jnp.sum(x, axis=0), [spec("B", 3)],
                 input_generator=ints(2**30, 2**31 - 1)),
        Testcase("reduce_sum_int32_wraps_static", lambda x: jnp.sum(x),
                 input_values=[np.asarray([2**31 - 1, 2**31 - 1, -(2**31), 5], np.int32)]),
        Testcase("reduce_sum_uint64_wraps", lambda x: jnp.sum(x, axis=1), input_values=[_U64_ROWS]),
        Testcase("reduce_sum_int64_exact", lambda x: jnp.sum(x, axis=1),
                 input_values=[np.asarray([[2**60 + 1, 2**60 + 1, 1], [2**63 - 1, 1, -7]], np.int64)]),
    ]),
    Component("lax.reduce_prod", onnx=["ReduceProd"], since="v0.6.1", testcases=[
        # int products: Mul halving a static axis (ReduceProd saturates), ReduceProd over a symbolic one
        *_standard_cases("reduce_prod", jnp.prod, "ReduceProd", int_op=""),
        Testcase("reduce_prod_int32_wraps", lambda x: jnp.prod(x, axis=1),
                 input_values=[np.asarray([[2**20 + 1, 2**20 + 1, 3], [-(2**31), -1, 1], [65535, 65537, 7]], np.int32)]),
        Testcase("reduce_prod_uint64_wraps", lambda x: jnp.prod(x, axis=0), input_values=[_U64_ROWS]),
        # over a symbolic axis (a Scan; B may be 0: the empty product) and a static one together
        Testcase("reduce_prod_int32_wraps_symbolic", lambda x: jnp.prod(x, axis=(0, 2)), [spec("B", 2, 3)],
                 input_generator=ints(-2**31, 2**31 - 1)),
        Testcase("reduce_prod_dtype", lambda x: jnp.prod(x, axis=1, dtype=_float_default()), [spec("B", 4)],
                 expected_ops=["ReduceProd", "Cast"]),
    ]),
    Component("lax.reduce_max", onnx=["ReduceMax"], since="v0.2.0", testcases=[
        *_standard_cases("reduce_max", jnp.max, "ReduceMax"),
        Testcase("reduce_max_nan", lambda x: jnp.max(x, axis=1), input_values=[_NAN_ROWS], expected_ops=["ReduceMax"]),
        Testcase("reduce_max_int16", lambda x: jnp.max(x, axis=1), [spec("B", 4, dtype=jnp.int16)],
                 input_generator=ints(-99, 99)),
        Testcase("reduce_max_bool", lambda x: jnp.max(x, axis=1), [spec("B", 4, dtype=_BOOL)]),
        # uint64 (the x64 variant; without x64 JAX narrows to uint32): values on both sides of 2**63
        Testcase("reduce_max_uint64", lambda x: jnp.max(x, axis=1), input_values=[_U64_ROWS]),
    ]),
    Component("lax.reduce_min", onnx=["ReduceMin"], since="v0.2.0", testcases=[
        *_standard_cases("reduce_min", jnp.min, "ReduceMin"),
        Testcase("reduce_min_nan", lambda x: jnp.min(x, axis=1), input_values=[_NAN_ROWS], expected_ops=["ReduceMin"]),
        Testcase("reduce_min_uint32", lambda x: jnp.min(x, axis=0), [spec("B", 4, dtype=jnp.uint32)],
                 input_generator=ints(0, 2**32 - 1)),
        Testcase("reduce_min_uint64", lambda x: jnp.min(x, axis=1), input_values=[_U64_ROWS]),
    ]),
    Component("lax.reduce_and", onnx=["ReduceMin"], since="v0.6.1", testcases=_logical_cases(
        "reduce_and", _logical("reduce_and"),
        [("all_true", [[True] * 3] * 2), ("one_false", [[True, True, True], [True, False, True]])])),
    Component("lax.reduce_or", onnx=["ReduceMax"], since="v0.6.1", testcases=_logical_cases(
        "reduce_or", _logical("reduce_or"),
        [("all_false", [[False] * 3] * 2), ("one_true", [[False, False, False], [False, True, False]])])),
    Component("lax.reduce_xor", onnx=["Cast", "ReduceSum", "BitwiseAnd"], since="v0.6.1", testcases=_logical_cases(
        "reduce_xor", _logical("reduce_xor"),
        [("all_false", [[False] * 3] * 2), ("one_true", [[False, False, False], [False, True, False]]),
         ("two_true", [[True, False, False], [False, True, False]])])),
    Component("lax.argmax", onnx=["ArgMax"], since="v0.2.0", testcases=[
        Testcase("argmax_float_axis0", lambda x: jnp.argmax(x, axis=0), [("B", 4)], expected_ops=["ArgMax"]),
        Testcase("argmax_float_axis1", lambda x: jnp.argmax(x, axis=1), [("B", 4)], expected_ops=["ArgMax"]),
        Testcase("argmax_boolean_input_axis0_specific_values", lambda x: jnp.argmax(x, axis=0),
                 input_values=_bool_values([False, True, False], [True, True, False], [False, True, False])),
        Testcase("argmax_boolean_input_axis1_specific_values", lambda x: jnp.argmax(x, axis=1),
                 input_values=_bool_values([False, True, True], [False, False, False], [True, False, True])),
        Testcase("argmax_boolean_random_input_axis0", lambda x: jnp.argmax(x, axis=0), [spec("B", 4, dtype=_BOOL)]),
        Testcase("argmax_nan_and_ties", lambda x: jnp.argmax(x, axis=1), input_values=[_NAN_ROWS]),
        Testcase("argmax_int32_keepdims", lambda x: jnp.argmax(x, axis=1, keepdims=True), [spec("B", 5)]),
        Testcase("argmax_uint64", lambda x: jnp.argmax(x, axis=1), input_values=[_U64_ROWS]),
    ]),
    Component("lax.argmin", onnx=["ArgMin"], since="v0.2.0", testcases=[
        Testcase("argmin_test1", lambda x: jnp.argmin(x, axis=0), [("B", 4)], expected_ops=["ArgMin"]),
        Testcase("argmin_test2", lambda x: jnp.argmin(x, axis=1), [(3, "B")], expected_ops=["ArgMin"]),
        Testcase("argmin_nan_and_ties", lambda x: jnp.argmin(x, axis=1), input_values=[_NAN_ROWS]),
        Testcase("argmin_uint64", lambda x: jnp.argmin(x, axis=1), input_values=[_U64_ROWS]),
        Testcase("argmin_uint16", lambda x: jnp.argmin(x, axis=1), [spec("B", 5, dtype=jnp.uint16)],
                 input_generator=ints(0, 65536)),
    ]),
]

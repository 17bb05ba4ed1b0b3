"""Testcases of :mod:`jax2onnx_lax.float_bits` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ._testdata import SPECIAL, f32, ints, log_scale, spec


def _int_default():
    """int32, or int64 in the double-precision variants: the width of the default float."""
    return jax.dtypes.canonicalize_dtype(jnp.int64)


def _float_default():
    return jax.dtypes.canonicalize_dtype(jnp.float64)


def _check_bitcast_op_at_opset_26(fn, values):
    """The runner exports at the default opset; also export at 26, where ONNX BitCast exists."""

    def check(_model, variant):
        from jax2onnx import to_onnx
        from jax2onnx.frontend import compare
        from jax2onnx.testing.runner import op_types

        double = variant.double
        inputs = [v.astype(np.float64) if double else v for v in values]
        model = to_onnx(fn, inputs, opset=26, enable_double_precision=double)
        assert "BitCast" in op_types(model), sorted(op_types(model))
        result = compare(fn, model, inputs, rtol=0, atol=0, enable_double_precision=double)
        assert result.ok, str(result)

    return check


def _to_int_bits(x):
    return lax.bitcast_convert_type(x, _int_default())


_BITS_VALUES = f32(0.0, -0.0, 1.0, -2.5, 1e-40, -1e-45, 3.4028235e38, 1.1754944e-38, np.inf, -np.inf, np.nan, 0.1)


_ADJACENT = f32(1.0, 1.0, 0.0, 0.0, -1.0, 2.0, 1e-45, np.inf, 3.4028235e38, 1.1754944e-38, np.nan, 5.0)


_TOWARD = f32(2.0, 0.0, 1.0, -1.0, -2.0, 0.0, 0.0, 0.0, np.inf, 0.0, 1.0, 5.0)


components = [
    Component("lax.bitcast_convert_type", onnx=["BitShift", "BitwiseOr", "Log", "Pow", "Cast"], since="v0.7.0",
              testcases=[
        Testcase("bitcast_float_to_int", lambda x: lax.bitcast_convert_type(x, _int_default()), [("B", 5)],
                 input_generator=log_scale(-40, 38), expected_ops=["BitShift"]),
        Testcase("bitcast_float_to_int_special_values", _to_int_bits, input_values=[_BITS_VALUES],
                 check=_check_bitcast_op_at_opset_26(_to_int_bits, [_BITS_VALUES])),
        Testcase("bitcast_float_to_uint_special", lambda x: lax.bitcast_convert_type(x, jnp.uint32),
                 input_values=[_BITS_VALUES], run_f64=False),  # float64 -> uint32 changes the width
        Testcase("bitcast_int_to_float", lambda x: lax.bitcast_convert_type(x, _float_default()),
                 [spec("B", 6)], input_generator=ints(-2**31, 2**31 - 1), run_f64=False),
        Testcase("bitcast_roundtrip", lambda x: lax.bitcast_convert_type(lax.bitcast_convert_type(x, _int_default()),
                                                                         x.dtype), input_values=[SPECIAL]),
        Testcase("bitcast_int32_to_uint32", lambda x: lax.bitcast_convert_type(x, jnp.uint32), [spec("B", 4)],
                 input_generator=ints(-2**31, 2**31 - 1), expected_ops=["Cast"]),
        Testcase("bitcast_float16_to_int16", lambda x: lax.bitcast_convert_type(x.astype(jnp.float16), jnp.int16),
                 input_values=[f32(0.0, -0.0, 1.0, -2.5, 6e-8, 65504.0, np.inf, 1e-5, 0.1)]),
        Testcase("bitcast_uint16_to_bfloat16", lambda x: lax.bitcast_convert_type(x, jnp.bfloat16).astype(jnp.float32),
                 [spec("B", 6, dtype=jnp.uint16)], input_generator=ints(0, 65536), run_f64=False),
    ]),
    Component("lax.reduce_precision", onnx=["Round", "Pow", "Where"], since="v0.7.0", testcases=[
        Testcase("reduce_precision_to_float16", lambda x: lax.reduce_precision(x, 5, 10), [("B", 6)],
                 input_generator=log_scale(-9, 6), rtol=0, atol=0, rtol_f64=0, atol_f64=0),
        Testcase("reduce_precision_to_bfloat16", lambda x: lax.reduce_precision(x, 8, 7), [("B", 6)],
                 input_generator=log_scale(-40, 38), rtol=0, atol=0, rtol_f64=0, atol_f64=0),
        Testcase("reduce_precision_odd_format", lambda x: lax.reduce_precision(x, 4, 3), input_values=[
            f32(0.0, 1.0 / 3, 239.0, 241.0, 300.0, 0.015, 0.0156, -7.5, 1.0625, 1.1875, np.inf, np.nan)],
                 rtol=0, atol=0, rtol_f64=0, atol_f64=0),
        Testcase("reduce_precision_noop", lambda x: lax.reduce_precision(x, 11, 52), [("B", 3)],
                 forbidden_ops=["Round", "Pow"],
                 rtol=0, atol=0, rtol_f64=0, atol_f64=0),
        Testcase("reduce_precision_special_values", lambda x: lax.reduce_precision(x, 5, 2), input_values=[SPECIAL],
                 rtol=0, atol=0, rtol_f64=0, atol_f64=0),
    ]),
    Component("lax.nextafter", onnx=["Pow", "Log", "Where"], since="v0.7.0", testcases=[
        Testcase("nextafter", lax.nextafter, [("B", 6), ("B", 6)], input_generator=log_scale(-40, 38),
                 rtol=0, atol=0, rtol_f64=0, atol_f64=0),
        Testcase("nextafter_float16", lambda x, y: lax.nextafter(x.astype(jnp.float16), y.astype(jnp.float16)),
                 input_values=[_ADJACENT, _TOWARD], rtol=0, atol=0, rtol_f64=0, atol_f64=0),
        Testcase("nextafter_edges", lax.nextafter, input_values=[_ADJACENT, _TOWARD], rtol=0, atol=0, rtol_f64=0,
                 atol_f64=0),
    ]),
]

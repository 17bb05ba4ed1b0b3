"""Testcases of :mod:`jax2onnx_lax.conversions` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ._testdata import f32, ints, log_scale


def _convert(dtype):
    return lambda x: lax.convert_element_type(x, dtype)


def _int_default():
    return jax.dtypes.canonicalize_dtype(jnp.int64)


def _float_default():
    """float32, or float64 in the double-precision variants (evaluated while tracing)."""
    return jax.dtypes.canonicalize_dtype(jnp.float64)


_OUT_OF_RANGE = f32(np.nan, 1e10, -1e10, np.inf, -np.inf, -1.7, 2.9, 2147483520.0, 2147483648.0, 300.0, -129.0, 65536.0)


components = [
    Component("lax.convert_element_type", onnx=["Cast"], since="v0.2.0", testcases=[
        Testcase("convert_element_type", _convert(jnp.int32), [("B", 4)], expected_ops=["Cast"],
                 input_generator=log_scale(-2, 2)),
        Testcase("convert_element_type_int_to_default_float", lambda x: lax.convert_element_type(x, _float_default()),
                 [jax.ShapeDtypeStruct(("B", 4), jnp.int32)], expected_ops=["Cast"]),
        Testcase("convert_element_type_to_bool", _convert(jnp.bool_), input_values=[f32(0.0, -0.0, 0.5, np.nan,
                                                                                        -np.inf)],
                 expected_ops=["Cast"]),
        Testcase("convert_element_type_int_to_bool", _convert(jnp.bool_), [jax.ShapeDtypeStruct(("B", 4), jnp.int32)],
                 input_generator=ints(-2, 3)),
        Testcase("convert_element_type_bool_to_int", _convert(jnp.int32), [jax.ShapeDtypeStruct(("B", 4), jnp.bool_)]),
        Testcase("convert_element_type_int32_to_uint8_wraps", _convert(jnp.uint8), [jax.ShapeDtypeStruct(("B", 4),
                                                                                                         jnp.int32)],
                 input_generator=ints(-300, 300)),
        Testcase("convert_element_type_int32_to_int16", _convert(jnp.int16), [jax.ShapeDtypeStruct(("B", 4),
                                                                                                   jnp.int32)],
                 input_generator=ints(-70000, 70000)),
        Testcase("convert_element_type_uint32_to_int32", _convert(jnp.int32), [jax.ShapeDtypeStruct(("B", 4),
                                                                                                    jnp.uint32)]),
        *[Testcase(f"convert_element_type_saturates_to_{np.dtype(t).name}", _convert(t), input_values=[_OUT_OF_RANGE],
                   expected_ops=["Cast", "Clip"]) for t in (jnp.int32, jnp.uint32, jnp.int8, jnp.uint8, jnp.int16)],
        Testcase("convert_element_type_float16_roundtrip", lambda x: _convert(jnp.float16)(x).astype(x.dtype),
                 [("B", 4)],
                 expected_ops=["Cast"], rtol=1e-3, atol=1e-3, rtol_f64=1e-3, atol_f64=1e-3),
        Testcase("convert_element_type_bfloat16_roundtrip", lambda x: _convert(jnp.bfloat16)(x).astype(x.dtype),
                 [("B", 4)],
                 expected_ops=["Cast"], rtol=1e-2, atol=1e-2, rtol_f64=1e-2, atol_f64=1e-2),
        Testcase("convert_element_type_float16_to_int32", lambda x: _convert(jnp.int32)(x.astype(jnp.float16)),
                 [("B", 4)],
                 input_generator=log_scale(-2, 6)),
        # float64 -> float32 -> float64 in the double variant: the rounding to float32 must happen
        Testcase("convert_element_type_through_float32",
                 lambda x: lax.convert_element_type(lax.convert_element_type(x, jnp.float32), _float_default()),
                 [("B", 4)], rtol_f64=0, atol_f64=0),
        # float32 output on purpose: not applicable to the float64 variant
        Testcase("convert_element_type_int_to_float32", _convert(jnp.float32), [jax.ShapeDtypeStruct(("B", 4),
                                                                                                     jnp.int32)],
                 expected_ops=["Cast"], run_f64=False),
    ]),
    Component("lax.copy", onnx=["Identity"], since="v0.6.2", description="lax.copy_p (jnp.array(x, copy=True))",
              testcases=[
                  Testcase("copy_float32_array", lambda x: lax.copy_p.bind(x), [("B", 3)]),
                  # int64 when x64 is on (the float64 variant), int32 otherwise: JAX has no int64 without x64
                  Testcase("copy_int64_scalar", lambda x: jnp.array(x.astype(_int_default()), copy=True),
                           input_values=[np.asarray(7, dtype=np.int32)]),
              ]),
    Component("lax.device_put", onnx=["Identity"], since="v0.4.0", testcases=[
        Testcase("device_put_array", lambda x: jax.device_put(x) + 1.0, [("B", 3)]),
        Testcase("device_put_scalar", lambda x: jax.device_put(x) * 2.0, [()]),
        Testcase("device_put_pytree", lambda x, n: jax.device_put((x, n)), [("B", 3),
                                                                            jax.ShapeDtypeStruct((2,), jnp.int32)]),
    ]),
    Component("lax.stop_gradient", onnx=["Identity"], since="v0.2.0", testcases=[
        Testcase("stop_gradient", lambda x: lax.stop_gradient(x) * 2.0, [("B", 3)]),
        Testcase("stop_gradient_under_grad", jax.grad(lambda x: jnp.sum(x * lax.stop_gradient(x))), [("B", 3)]),
    ]),
    Component("lax.optimization_barrier", onnx=["Identity"], since="v0.7.0", testcases=[
        Testcase("optimization_barrier", lambda x, y: lax.optimization_barrier((x, y)), [("B", 3), ("B", 2)]),
    ]),
]

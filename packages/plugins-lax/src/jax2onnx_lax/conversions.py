"""lax dtype conversions and identities: convert_element_type, copy, device_put, stop_gradient,
optimization_barrier. (bitcast_convert_type and reduce_precision live in ``float_bits``.)"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.dtypes import F32, F64, is_float, is_int
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import _numeric as nm
from . import complex_pairs as cp
from ._testdata import f32, ints, log_scale

lowerings = Lowerings()


def _largest_below(limit: int, dtype: np.dtype) -> float:
    """The largest ``dtype`` float that is <= the integer ``limit``."""
    v = np.asarray(limit, dtype=dtype)
    if int(v) > limit:
        v = np.nextafter(v, dtype.type(0))
    return v


def float_to_int(ctx, x, src: np.dtype, dst: np.dtype):
    """Truncate toward zero, saturating at the int range, NaN -> 0: XLA's conversion. A bare Cast
    of an out-of-range float is undefined in C++ (onnxruntime gives INT_MIN on x86)."""
    if src not in (F32, F64):  # float16/bfloat16 widen exactly
        x, src = ctx.cast(x, F32), F32
    info = np.iinfo(dst)
    lo, hi = np.asarray(info.min, dtype=src), _largest_below(int(info.max), src)
    x = ctx.op.Where(ctx.op.IsNaN(x), ctx.const(0, src), x)
    out = ctx.cast(ctx.op.Clip(x, ctx.const(lo), ctx.const(hi)), dst)
    if int(hi) < int(info.max):  # floats above hi round past the max: saturate them explicitly
        out = nm.where(ctx, ctx.op.Greater(x, ctx.const(hi)), ctx.const(info.max, dst), out, dst)
    return out


def _convert_complex(ctx, x):
    """real -> complex: the value as the real part, imaginary part 0 (a constant operand folds, so a
    pad value or a literal stays a constant). complex -> complex: Cast of the pairs. complex ->
    anything else: the real part, converted on (JAX discards the imaginary part, with a
    ComplexWarning; also for bool, where 1j becomes False)."""
    src, dst = nm.dtype_of(ctx.avals_in[0]), nm.dtype_of(ctx.avals_out[0])
    if src == dst:
        return ctx.op.Identity(x)
    if not cp.is_complex(dst):
        return _convert_real(ctx, cp.real_part(ctx, x), cp.part_dtype(src), dst)
    part = cp.part_dtype(dst)
    if cp.is_complex(src):
        return ctx.cast(x, part)
    value = nm.const_value(x)
    if value is not None:
        return ctx.const(cp.pair_array(value.astype(dst), dst))
    return cp.from_real(ctx, ctx.cast(x, part), len(ctx.avals_in[0].shape))


@lowerings.register("convert_element_type", complex=_convert_complex)
def lower_convert_element_type(ctx, x):
    src, dst = nm.dtype_of(ctx.avals_in[0]), nm.dtype_of(ctx.avals_out[0])
    if src == dst:
        return ctx.op.Identity(x)
    return _convert_real(ctx, x, src, dst)


def _convert_real(ctx, x, src: np.dtype, dst: np.dtype):
    if src == dst:  # the real part of a complex value, already of the wanted dtype
        return x
    if is_float(src) and is_int(dst):
        return float_to_int(ctx, x, src, dst)
    # Everything else is Cast: float->bool is x != 0 (NaN -> True), ints wrap like XLA, floats
    # round to nearest even.
    return ctx.cast(x, dst)


def _identity(ctx, *xs):
    return [ctx.op.Identity(x) for x in xs]


# A copy, a device transfer, a gradient stop or a scheduling barrier do not change values.
for _prim in ("copy", "device_put", "stop_gradient", "optimization_barrier"):
    lowerings.add(_prim, _identity)


# ---------------------------------------------------------------------------------------------
# Testcases


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

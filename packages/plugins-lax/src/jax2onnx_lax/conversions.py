"""lax dtype conversions and identities: convert_element_type, copy, device_put, stop_gradient,
optimization_barrier. (bitcast_convert_type and reduce_precision live in ``float_bits``.)"""

from __future__ import annotations

import numpy as np
from jax2onnx.dtypes import F32, F64, is_float, is_int
from jax2onnx.fusion import const_array
from jax2onnx.plugin import Lowerings

from . import _numeric as nm
from . import complex_pairs as cp

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
    value = const_array(x)
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

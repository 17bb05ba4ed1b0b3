"""lax ops on the bit layout of floats: bitcast_convert_type, reduce_precision, nextafter.

ONNX gained BitCast only in opset 26. Before that, what is expressible:
- int <-> int of the same width: Cast is a two's-complement reinterpretation (modular both ways);
- float <-> int of the same width: the fields are computed arithmetically in float64, where every
  step is exact: exponent = floor(log2 |x|) (corrected by comparing with 2**e), significand =
  |x| / 2**e scaled to an integer, assembled with integer shifts (and the reverse for int -> float).
  One thing is lost: NaN payloads and the NaN sign bit; every NaN encodes as the quiet NaN 0x7fc...;
- bitcasts that change the width (f32 -> 4 x u8) are not expressible and raise.
reduce_precision and nextafter use the same exponent arithmetic; all results are exact.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from jax2onnx.dtypes import BF16, F16, F32, F64, U64, is_float, is_int, unsigned_of
from jax2onnx.plugin import Lowerings

from . import _numeric as nm
from .transcendental import Math

lowerings = Lowerings()


@dataclasses.dataclass(frozen=True)
class FloatFormat:
    exponent_bits: int
    mantissa_bits: int

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def emin(self) -> int:  # exponent of the smallest normal
        return 1 - self.bias

    @property
    def width(self) -> int:
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def max_finite(self) -> float:
        return (2.0 - 2.0 ** -self.mantissa_bits) * 2.0**self.bias


FORMATS = {F16: FloatFormat(5, 10), F32: FloatFormat(8, 23), F64: FloatFormat(11, 52)}
if BF16 is not None:
    FORMATS[BF16] = FloatFormat(8, 7)


def _pow2(m, e):
    return m.op.Pow(m.k(2.0), e)


def binade(m, a, fmt: FloatFormat):
    """floor(log2 a) for finite a > 0 in float64, exact, clamped below at the format's emin (so
    subnormals share the emin grid). Log rounds, so the estimate is nudged by one where 2**e says so."""
    op = m.op
    e = op.Floor(op.Div(op.Log(a), m.k(math.log(2.0))))
    e = op.Sub(e, m.ctx.cast(op.Greater(_pow2(m, e), a), F64))
    e = op.Add(e, m.ctx.cast(op.LessOrEqual(_pow2(m, op.Add(e, m.k(1.0))), a), F64))
    return op.Max(e, m.k(float(fmt.emin)))


def _to_f64(ctx, x, dtype):
    return ctx.cast(x, F64)


def float_to_bits(ctx, x, src, dst):
    fmt = FORMATS[src]
    m = Math(ctx, F64)
    op = m.op
    xd = _to_f64(ctx, x, src)
    a = op.Abs(xd)
    e = binade(m, a, fmt)
    normal = op.GreaterOrEqual(a, m.k(2.0**fmt.emin))
    scaled = op.Mul(op.Mul(a, _pow2(m, op.Neg(e))), m.k(2.0**fmt.mantissa_bits))  # exact: a power-of-2 scale
    mantissa = op.Where(normal, op.Sub(scaled, m.k(2.0**fmt.mantissa_bits)), scaled)
    exponent = op.Where(normal, op.Add(e, m.k(float(fmt.bias))), m.k(0.0))
    all_ones = m.k(float((1 << fmt.exponent_bits) - 1))
    special = op.Or(op.IsInf(a), op.IsNaN(a))
    exponent = op.Where(special, all_ones, exponent)
    mantissa = op.Where(op.IsNaN(a), m.k(2.0 ** (fmt.mantissa_bits - 1)), op.Where(op.IsInf(a), m.k(0.0), mantissa))
    u = ctx.op.BitShift(ctx.cast(exponent, U64), ctx.const(fmt.mantissa_bits, U64), direction="LEFT")
    u = ctx.op.BitwiseOr(u, ctx.cast(mantissa, U64))
    sign = ctx.cast(op.And(m.is_negative(xd), op.Not(op.IsNaN(xd))), U64)
    u = ctx.op.BitwiseOr(u, ctx.op.BitShift(sign, ctx.const(fmt.width - 1, U64), direction="LEFT"))
    unsigned = unsigned_of(dst)  # narrowing casts wrap: they keep the low bits
    return ctx.cast(ctx.cast(u, unsigned), dst)


def bits_to_float(ctx, bits, src, dst):
    fmt = FORMATS[dst]
    m = Math(ctx, F64)
    op = m.op
    u = ctx.cast(ctx.cast(bits, unsigned_of(src)), U64)  # zero-extend

    def field(shift, width):
        shifted = op.BitShift(u, ctx.const(shift, U64), direction="RIGHT") if shift else u
        return ctx.cast(op.BitwiseAnd(shifted, ctx.const((1 << width) - 1, U64)), F64)

    mantissa, exponent = field(0, fmt.mantissa_bits), field(fmt.mantissa_bits, fmt.exponent_bits)
    negative = op.Equal(field(fmt.width - 1, 1), m.k(1.0))
    fraction = op.Mul(mantissa, m.k(2.0 ** -fmt.mantissa_bits))
    normal = op.Mul(op.Add(m.k(1.0), fraction), _pow2(m, op.Sub(exponent, m.k(float(fmt.bias)))))
    subnormal = op.Mul(mantissa, m.k(2.0 ** (fmt.emin - fmt.mantissa_bits)))
    value = op.Where(op.Equal(exponent, m.k(0.0)), subnormal, normal)
    special = op.Where(op.Equal(mantissa, m.k(0.0)), m.k(np.inf), m.k(np.nan))
    value = op.Where(op.Equal(exponent, m.k(float((1 << fmt.exponent_bits) - 1))), special, value)
    return ctx.cast(m.neg_if(negative, value), dst)


@lowerings.register("bitcast_convert_type")
def lower_bitcast_convert_type(ctx, x):
    src, dst = nm.dtype_of(ctx.avals_in[0]), nm.dtype_of(ctx.avals_out[0])
    if src == dst:
        return ctx.op.Identity(x)
    if src.itemsize != dst.itemsize:
        raise NotImplementedError(
            f"bitcast_convert_type {src.name} -> {dst.name} changes the element width; ONNX cannot express "
            "that (even BitCast, opset 26, needs equal widths). Bitcast between dtypes of the same width.")
    if src in ctx.kernel_dtypes("BitCast"):  # none before opset 26
        return ctx.op.BitCast(x, to=int(ctx.onnx_dtype(dst)))
    if is_int(src) and is_int(dst):
        return ctx.cast(x, dst)
    if is_float(src) and is_int(dst):
        return float_to_bits(ctx, x, src, dst)
    if is_int(src) and is_float(dst):
        return bits_to_float(ctx, x, src, dst)
    if is_float(src) and is_float(dst):  # float16 <-> bfloat16
        carrier = unsigned_of(src)
        return bits_to_float(ctx, float_to_bits(ctx, x, src, carrier), carrier, dst)
    raise NotImplementedError(f"bitcast_convert_type {src.name} -> {dst.name} is not supported before opset 26")


@lowerings.register("reduce_precision")
def lower_reduce_precision(ctx, x):
    """Round to ``mantissa_bits`` (to nearest even, on the source's own grid, subnormals included),
    then, if ``exponent_bits`` is narrower than the source's, overflow to +-inf and flush values below
    the narrow format's smallest normal to +-0: what XLA's bit-level implementation does."""
    dtype = nm.dtype_of(ctx.avals_in[0])
    src = FORMATS[dtype]
    ebits, mbits = int(ctx.params["exponent_bits"]), int(ctx.params["mantissa_bits"])
    if mbits >= src.mantissa_bits and ebits >= src.exponent_bits:
        return ctx.op.Identity(x)
    m = Math(ctx, F64)
    op = m.op
    xd = _to_f64(ctx, x, dtype)
    r = xd
    if mbits < src.mantissa_bits:
        a = op.Abs(xd)
        ulp = _pow2(m, op.Sub(binade(m, a, src), m.k(float(mbits))))
        rounded = op.Mul(op.Round(op.Div(xd, ulp)), ulp)
        r = op.Where(op.Or(op.IsInf(xd), op.IsNaN(xd)), xd, op.Where(op.Equal(a, m.k(0.0)), xd, rounded))
    if ebits < src.exponent_bits:
        narrow = FloatFormat(ebits, mbits)
        a = op.Abs(r)
        r = op.Where(op.Greater(a, m.k(narrow.max_finite)), op.Mul(r, m.k(np.inf)), r)
        r = op.Where(op.Less(a, m.k(2.0**narrow.emin)), op.Mul(r, m.k(0.0)), r)
    return ctx.cast(r, dtype)


@lowerings.register("nextafter")
def lower_nextafter(ctx, x, y):
    """x + (one ulp toward y): the ulp of |x|'s binade, half of it when stepping down from an exact
    power of two (the binade below is finer); 0 steps to the smallest subnormal, inf to max finite."""
    dtype = nm.dtype_of(ctx.avals_in[0])
    fmt = FORMATS[dtype]
    m = Math(ctx, F64)
    op = m.op
    xd, yd = _to_f64(ctx, x, dtype), _to_f64(ctx, y, dtype)
    a = op.Abs(xd)
    e = binade(m, a, fmt)
    ulp = _pow2(m, op.Sub(e, m.k(float(fmt.mantissa_bits))))
    up = op.Greater(yd, xd)
    toward_zero = op.Equal(op.Greater(xd, m.k(0.0)), op.Not(up))
    power_of_two = op.And(op.Equal(a, _pow2(m, e)), op.Greater(e, m.k(float(fmt.emin))))
    step = op.Where(op.And(toward_zero, power_of_two), op.Mul(ulp, m.k(0.5)), ulp)
    r = op.Add(xd, op.Where(up, step, op.Neg(step)))
    tiny = m.k(2.0 ** (fmt.emin - fmt.mantissa_bits))
    r = op.Where(op.Equal(xd, m.k(0.0)), op.Where(up, tiny, op.Neg(tiny)), r)
    r = op.Where(op.IsInf(xd), op.Mul(op.Sign(xd), m.k(fmt.max_finite)), r)
    r = op.Where(op.Equal(xd, yd), yd, r)
    r = op.Where(op.Or(op.IsNaN(xd), op.IsNaN(yd)), op.Add(xd, yd), r)
    return ctx.cast(r, dtype)

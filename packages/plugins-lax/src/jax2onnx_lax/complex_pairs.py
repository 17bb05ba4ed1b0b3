"""Complex values as real pairs: the layout helpers and the complex arithmetic the lax lowerings
share. Arithmetic lowerings name their complex form with ``register(..., complex=...)`` (core picks
it for complex equations; :func:`lower_elementwise`, :func:`equal`, :func:`unsupported` are such
forms); shape lowerings, whose pairs only gain a trailing axis, check :func:`is_complex` inline.

Core types a complex aval of shape ``S`` as a real tensor of shape ``S + (2,)`` holding
(real, imag), the layout of ONNX's DFT. Shape lowerings keep that pair axis last and untouched
(permutations, broadcast dims and target shapes gain one trailing entry); elementwise lowerings
work on the two parts. lax gives both operands of a binary op the same dtype, so a complex op
never meets a real operand; a scalar complex literal is a ``(2,)`` tensor, which broadcasts
against ``S + (2,)`` like the scalar did against ``S``. Bool operands that meet pairs (a
``select_n`` predicate, a fill mask) get a trailing unit axis (:func:`lift`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir


def is_complex(aval_or_dtype: Any) -> bool:
    dtype = getattr(aval_or_dtype, "dtype", aval_or_dtype)
    return np.dtype(dtype).kind == "c"


def part_dtype(aval_or_dtype: Any) -> np.dtype:
    """The dtype of each part: float32 for complex64, float64 for complex128; real dtypes as is."""
    dtype = np.dtype(getattr(aval_or_dtype, "dtype", aval_or_dtype))
    if dtype.kind != "c":
        return dtype
    return np.dtype(np.float32 if dtype == np.complex64 else np.float64)


def pair_shape(shape: Sequence[Any]) -> list[Any]:
    return [*shape, 2]


def pair_perm(perm: Sequence[int]) -> list[int]:
    """A permutation of the complex axes, extended to keep the pair axis last."""
    return [*(int(p) for p in perm), len(perm)]


def pair_array(value: Any, dtype: Any) -> np.ndarray:
    """A numpy value of complex ``dtype`` as its (real, imag) pairs."""
    arr = np.asarray(value, dtype=np.dtype(dtype))
    return np.stack([arr.real, arr.imag], axis=-1)


def _axis(ctx: Any, axis: int) -> ir.Value:
    return ctx.i64([axis])


def lift(ctx: Any, x: ir.Value) -> ir.Value:
    """A real or bool operand meeting pairs: a trailing unit axis, so it broadcasts over both parts."""
    return ctx.op.Unsqueeze(x, _axis(ctx, -1))


def split(ctx: Any, z: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(real, imag), each keeping a trailing axis of 1 (ready for elementwise math and :func:`join`)."""
    return ctx.op.Split(z, axis=-1, num_outputs=2, _outputs=2)


def join(ctx: Any, re: ir.Value, im: ir.Value) -> ir.Value:
    """Inverse of :func:`split`."""
    return ctx.op.Concat(re, im, axis=-1)


def real_part(ctx: Any, z: ir.Value) -> ir.Value:
    """The real part without the pair axis (the shape of the complex aval)."""
    return ctx.op.Gather(z, np.asarray(0, dtype=np.int64), axis=-1)


def imag_part(ctx: Any, z: ir.Value) -> ir.Value:
    return ctx.op.Gather(z, np.asarray(1, dtype=np.int64), axis=-1)


def from_parts(ctx: Any, re: ir.Value, im: ir.Value) -> ir.Value:
    """Pairs from two tensors of the complex aval's shape."""
    return join(ctx, lift(ctx, re), lift(ctx, im))


def from_real(ctx: Any, x: ir.Value, rank: int) -> ir.Value:
    """A real tensor of rank ``rank`` as complex: a trailing axis padded with a zero imaginary part."""
    pads = [0] * (2 * (rank + 1))
    pads[-1] = 1
    return ctx.op.Pad(lift(ctx, x), ctx.i64(pads))


# ---------------------------------------------------------------------------------------------
# arithmetic on pairs (the value's part dtype is float32 or float64, onnxruntime has every kernel)


def mul(ctx: Any, x: ir.Value, y: ir.Value) -> ir.Value:
    """(a + bi)(c + di) = (ac - bd) + (ad + bc)i, the product XLA forms."""
    a, b = split(ctx, x)
    c, d = split(ctx, y)
    op = ctx.op
    return join(ctx, op.Sub(op.Mul(a, c), op.Mul(b, d)), op.Add(op.Mul(a, d), op.Mul(b, c)))


def div(ctx: Any, x: ir.Value, y: ir.Value) -> ir.Value:
    """Smith's algorithm: divide through by the larger of |c|, |d|, so c^2 + d^2 never overflows."""
    a, b = split(ctx, x)
    c, d = split(ctx, y)
    op = ctx.op
    # |c| >= |d|: r = d/c, den = c + d r, ((a + b r) + (b - a r) i) / den
    r1 = op.Div(d, c)
    den1 = op.Add(c, op.Mul(d, r1))
    re1, im1 = op.Div(op.Add(a, op.Mul(b, r1)), den1), op.Div(op.Sub(b, op.Mul(a, r1)), den1)
    # |c| < |d|: r = c/d, den = c r + d, ((a r + b) + (b r - a) i) / den
    r2 = op.Div(c, d)
    den2 = op.Add(op.Mul(c, r2), d)
    re2, im2 = op.Div(op.Add(op.Mul(a, r2), b), den2), op.Div(op.Sub(op.Mul(b, r2), a), den2)
    first = op.GreaterOrEqual(op.Abs(c), op.Abs(d))
    return join(ctx, op.Where(first, re1, re2), op.Where(first, im1, im2))


def magnitude(ctx: Any, z: ir.Value, dtype: Any, keep_pair_axis: bool = False) -> ir.Value:
    """|z| like hypot: hi * sqrt(1 + (lo/hi)^2) with hi, lo = max, min of |re|, |im|, so squares
    never overflow or underflow. lo == hi (both 0, both inf, or equal) takes the ratio 1; NaN
    propagates through Max/Min."""
    op = ctx.op
    re, im = split(ctx, z)
    a, b = op.Abs(re), op.Abs(im)
    hi, lo = op.Max(a, b), op.Min(a, b)
    one = ctx.const(1, dtype)
    ratio = op.Where(op.Equal(hi, lo), one, op.Div(lo, hi))
    mag = op.Mul(hi, op.Sqrt(op.Add(one, op.Mul(ratio, ratio))))
    return mag if keep_pair_axis else op.Squeeze(mag, _axis(ctx, -1))


def sign(ctx: Any, z: ir.Value, dtype: Any) -> ir.Value:
    """z / |z|, and 0 at 0 (JAX's sign of a complex number)."""
    mag = magnitude(ctx, z, dtype, keep_pair_axis=True)
    zero = ctx.const(0, dtype)
    return ctx.op.Where(ctx.op.Equal(mag, zero), zero, ctx.op.Div(z, mag))


def exp(ctx: Any, z: ir.Value) -> ir.Value:
    """exp(a + bi) = e^a (cos b + i sin b)."""
    a, b = split(ctx, z)
    e = ctx.op.Exp(a)
    return join(ctx, ctx.op.Mul(e, ctx.op.Cos(b)), ctx.op.Mul(e, ctx.op.Sin(b)))


def one_like(ctx: Any, z: ir.Value, dtype: Any) -> ir.Value:
    """1 + 0i, broadcast to the shape of ``z``."""
    return ctx.op.Expand(ctx.const([1, 0], dtype), ctx.op.Shape(z))


def integer_pow(ctx: Any, z: ir.Value, y: int, dtype: Any) -> ir.Value:
    """Square-and-multiply with complex products, then 1/acc for negative powers (JAX's own
    formulation, so the roundings match)."""
    if y == 0:
        return one_like(ctx, z, dtype)
    n, acc, base = abs(y), None, z
    while n:
        if n & 1:
            acc = base if acc is None else mul(ctx, acc, base)
        n >>= 1
        if n:
            base = mul(ctx, base, base)
    return div(ctx, ctx.const([1, 0], dtype), acc) if y < 0 else acc


def unsupported(ctx: Any, *_xs: ir.Value) -> ir.Value:
    """The ``complex=`` variant of a lowering that has no complex form (lax orders no complex numbers)."""
    raise NotImplementedError(f"'{ctx.primitive}' of complex values is not supported")


def equal(ctx: Any, x: ir.Value, y: ir.Value) -> ir.Value:
    """Both parts equal (NaN in either part makes it unequal, like XLA)."""
    eq = ctx.op.Equal(x, y)
    return ctx.op.ReduceMin(eq, _axis(ctx, -1), keepdims=0)


#: elementwise lax primitives on complex operands: primitive -> fn(ctx, dtype, *pairs), where
#: ``dtype`` is the part dtype (float32/float64).
ELEMENTWISE = {
    "add": lambda ctx, dt, x, y: ctx.op.Add(x, y),
    "add_any": lambda ctx, dt, x, y: ctx.op.Add(x, y),
    "sub": lambda ctx, dt, x, y: ctx.op.Sub(x, y),
    "neg": lambda ctx, dt, x: ctx.op.Neg(x),
    "mul": lambda ctx, dt, x, y: mul(ctx, x, y),
    "div": lambda ctx, dt, x, y: div(ctx, x, y),
    "square": lambda ctx, dt, x: mul(ctx, x, x),
    "abs": lambda ctx, dt, x: magnitude(ctx, x, dt),
    "sign": lambda ctx, dt, x: sign(ctx, x, dt),
    "exp": lambda ctx, dt, x: exp(ctx, x),
    "integer_pow": lambda ctx, dt, x: integer_pow(ctx, x, int(ctx.params["y"]), dt),
}


def lower_elementwise(ctx: Any, *xs: ir.Value) -> ir.Value:
    """The complex form of the elementwise primitive ``ctx.primitive`` (operands are pairs): the
    ``complex=`` variant of the elementwise lowerings."""
    fn = ELEMENTWISE.get(ctx.primitive)
    if fn is None:
        raise NotImplementedError(f"'{ctx.primitive}' of complex values (complex values are (real, imag) pairs; "
                                  f"lowered for complex: {sorted(ELEMENTWISE)})")
    return fn(ctx, part_dtype(ctx.avals_in[0]), *xs)

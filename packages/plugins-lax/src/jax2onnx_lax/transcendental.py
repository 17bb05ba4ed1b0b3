"""lax trigonometric/hyperbolic functions and friends: tan, asin, acos, atan, atan2, sinh, cosh,
asinh, acosh, atanh, log1p, expm1, cbrt.

onnxruntime has float32-only kernels for Tan/Asin/Acos/Atan/Sinh/Cosh/Asinh/Acosh/Atanh, so float32
(and float16/bfloat16, computed in float32) use the ONNX op, and float64 is built from ops that have
float64 kernels (Sin, Cos, Exp, Log, Sqrt) with formulas that keep full precision:
- atan: the float32 Atan as a first guess, then one Halley step on tan(y) = t (cubic convergence:
  2**-24 error becomes far below 2**-53), after reducing |x| > 1 to 1/|x|;
- asin, acos: half-angle forms through atan (no cancellation near +-1);
- sinh, cosh, asinh, acosh, atanh: through exp(a/2) and an accurate log1p.
ONNX has no log1p/expm1: both use the classic exact-rounding-compensated forms
(log(u) * x / (u - 1) with u = 1 + x; (u - 1) * x / log(u) with u = exp(x)). XLA's own log1p kernel
(:mod:`.random_float_kernels`, bitwise JAX's in float32) is not the log1p lowering: it costs ~170
ops against 9 (softplus 11x slower in onnxruntime), see the lax README's jax.random section.
"""

from __future__ import annotations

import math

import numpy as np
from jax2onnx.dtypes import F32, F64, FLOAT_MATH
from jax2onnx.plugin import Lowerings

from . import _numeric as nm
from . import complex_pairs as cp

lowerings = Lowerings()


class Math:
    """Ops on one float dtype ``c`` with typed constants: ``m.k(0.5)``, ``m.op.Exp(x)``."""

    def __init__(self, ctx, c):
        self.ctx, self.op, self.c = ctx, ctx.op, np.dtype(c)

    def k(self, v):
        return self.ctx.const(v, self.c)

    def neg_if(self, cond, v):
        return self.op.Where(cond, self.op.Neg(v), v)

    def is_negative(self, x):
        """x < 0, and also -0.0 (1/x = -inf), for the quadrant of atan2."""
        return self.op.Or(self.op.Less(x, self.k(0)), self.op.Less(self.op.Reciprocal(x), self.k(0)))

    def log1p(self, x):
        op = self.op
        u = op.Add(x, self.k(1))
        r = op.Where(op.Equal(u, self.k(1)), x, op.Mul(op.Log(u), op.Div(x, op.Sub(u, self.k(1)))))
        return op.Where(op.Equal(x, self.k(np.inf)), x, r)

    def expm1(self, x):
        op = self.op
        u = op.Exp(x)
        um1 = op.Sub(u, self.k(1))
        r = op.Where(op.Equal(u, self.k(1)), x, op.Mul(um1, op.Div(x, op.Log(u))))
        r = op.Where(op.Equal(um1, self.k(-1)), self.k(-1), r)
        return op.Where(op.Equal(u, self.k(np.inf)), u, r)

    def atan_unit(self, t):
        """atan(t) for t in [0, 1] (NaN passes through)."""
        op = self.op
        if self.c != F64:
            return op.Atan(t)
        y0 = self.ctx.cast(op.Atan(self.ctx.cast(t, F32)), F64)
        cy = op.Cos(y0)
        u = op.Mul(cy, op.Sub(op.Sin(y0), op.Mul(t, cy)))  # (tan y0 - t) * cos(y0)**2
        return op.Sub(y0, op.Div(u, op.Sub(self.k(1), op.Mul(u, t))))

    def atan(self, x):
        op = self.op
        a = op.Abs(x)
        inverted = op.Greater(a, self.k(1))
        y = self.atan_unit(op.Where(inverted, op.Reciprocal(a), a))
        y = op.Where(inverted, op.Sub(self.k(math.pi / 2), y), y)
        return self.neg_if(op.Less(x, self.k(0)), y)

    def exp_half_squared(self, a):
        """(h, 0.5*h*h, 0.5/h/h) with h = exp(a/2): e**a/2 without overflowing before the result does."""
        op = self.op
        h = op.Exp(op.Mul(a, self.k(0.5)))
        return op.Mul(op.Mul(h, self.k(0.5)), h), op.Div(op.Div(self.k(0.5), h), h)


def _float_lowering(prim: str, onnx_f32: str | None, f64_formula):
    """float32 -> the ONNX op (if any), float64 -> ``f64_formula(m, x)``."""

    def lower(ctx, x):
        c = nm.dtype_of(ctx.avals_in[0])  # float32 or float64: registered with dtypes=FLOAT_MATH
        if c == F32 and onnx_f32 is not None:
            return getattr(ctx.op, onnx_f32)(x)
        return f64_formula(Math(ctx, c), x)

    lower.__name__ = f"lower_{prim}"
    return lower


def _sinh(m, x):
    op = m.op
    a = op.Abs(x)
    e = m.expm1(a)
    small = op.Mul(m.k(0.5), op.Add(e, op.Div(e, op.Add(e, m.k(1)))))
    big_pos, big_neg = m.exp_half_squared(a)
    s = op.Where(op.Less(a, m.k(1)), small, op.Sub(big_pos, big_neg))
    return m.neg_if(op.Less(x, m.k(0)), s)


def _cosh(m, x):
    pos, neg = m.exp_half_squared(m.op.Abs(x))
    return m.op.Add(pos, neg)


def _asinh(m, x):
    op = m.op
    a = op.Abs(x)
    a2 = op.Mul(a, a)
    moderate = m.log1p(op.Add(a, op.Div(a2, op.Add(m.k(1), op.Sqrt(op.Add(m.k(1), a2))))))
    huge = op.Add(op.Log(a), m.k(math.log(2)))  # a*a would overflow; sqrt(1 + a*a) == a there
    r = op.Where(op.Greater(a, m.k(2.0**28)), huge, moderate)
    return m.neg_if(op.Less(x, m.k(0)), r)


def _acosh(m, x):
    op = m.op
    t = op.Sub(x, m.k(1))
    moderate = m.log1p(op.Add(t, op.Sqrt(op.Mul(t, op.Add(t, m.k(2))))))
    huge = op.Add(op.Log(x), m.k(math.log(2)))
    r = op.Where(op.Greater(x, m.k(2.0**28)), huge, moderate)
    return op.Where(op.Less(x, m.k(1)), m.k(np.nan), r)


def _atanh(m, x):
    op = m.op
    a = op.Abs(x)
    r = op.Mul(m.k(0.5), m.log1p(op.Div(op.Mul(m.k(2), a), op.Sub(m.k(1), a))))
    return m.neg_if(op.Less(x, m.k(0)), r)


def _asin(m, x):
    op = m.op
    root = op.Sqrt(op.Mul(op.Sub(m.k(1), x), op.Add(m.k(1), x)))
    return op.Mul(m.k(2), m.atan(op.Div(x, op.Add(m.k(1), root))))


def _acos(m, x):
    op = m.op
    return op.Mul(m.k(2), m.atan(op.Sqrt(op.Div(op.Sub(m.k(1), x), op.Add(m.k(1), x)))))


def _cbrt(m, x):
    """|x|**(1/3) by Pow, refined by one Newton step (Pow's rounded 1/3 exponent is off by ulps)."""
    op = m.op
    a = op.Abs(x)
    r = op.Pow(a, m.k(1.0 / 3.0))
    refined = op.Sub(r, op.Div(op.Sub(r, op.Div(a, op.Mul(r, r))), m.k(3)))
    r = op.Where(op.Or(op.Equal(r, m.k(0)), op.IsInf(r)), r, refined)
    return m.neg_if(op.Less(x, m.k(0)), r)


#: primitive -> (float32 ONNX op or None, float64 formula).
FUNCTIONS = {
    "tan": ("Tan", lambda m, x: m.op.Div(m.op.Sin(x), m.op.Cos(x))),
    "atan": ("Atan", lambda m, x: m.atan(x)),
    "asin": ("Asin", _asin),
    "acos": ("Acos", _acos),
    "sinh": ("Sinh", _sinh),
    "cosh": ("Cosh", _cosh),
    "asinh": ("Asinh", _asinh),
    "acosh": ("Acosh", _acosh),
    "atanh": ("Atanh", _atanh),
    "log1p": (None, lambda m, x: m.log1p(x)),
    "expm1": (None, lambda m, x: m.expm1(x)),
    "cbrt": (None, _cbrt),
}

for _prim, (_op, _formula) in FUNCTIONS.items():
    lowerings.add(_prim, _float_lowering(_prim, _op, _formula), dtypes=FLOAT_MATH, complex=cp.unsupported)


@lowerings.register("atan2", dtypes=FLOAT_MATH, complex=cp.unsupported)
def lower_atan2(ctx, y, x):
    """atan of min(|x|,|y|)/max(|x|,|y|) in [0, 1], then the octant and quadrant: pi/2 - r when
    |y| > |x|, pi - r when x is negative (-0.0 included), negated when y is (-0.0 included)."""
    m = Math(ctx, nm.dtype_of(ctx.avals_in[0]))
    op = m.op
    ax, ay = op.Abs(x), op.Abs(y)
    steep = op.Greater(ay, ax)
    num, den = op.Where(steep, ax, ay), op.Where(steep, ay, ax)
    t = op.Div(num, den)
    t = op.Where(op.Equal(den, m.k(0)), m.k(0), t)  # both zero
    t = op.Where(op.IsInf(num), m.k(1), t)  # both infinite
    r = m.atan_unit(t)
    r = op.Where(steep, op.Sub(m.k(math.pi / 2), r), r)
    r = op.Where(m.is_negative(x), op.Sub(m.k(math.pi), r), r)
    r = m.neg_if(m.is_negative(y), r)
    return op.Where(op.Or(op.IsNaN(x), op.IsNaN(y)), op.Add(x, y), r)

"""lax error functions: erf, erfc, erf_inv.

float32 erfc (exact GELU and the normal CDF reach it: 17 nodes):
- x < 1: 1 - Erf(x), as XLA computes it there (erfc >= 0.157, so the subtraction loses < 3 bits);
- x >= 1: exp(-x*x) * R(x), R a (3, 3) rational fit of erfc(x) exp(x^2) on [1, 9.3] written as a
  continued fraction (constants and their derivation: packages/plugins-lax/tools/fit_erfc_tail.py;
  5.6e-7 max relative error evaluated in float32). exp(-x*x) rounds x*x as XLA does, so the two
  agree to a few ulps where exp magnifies that rounding (x near 9).

onnxruntime's Erf has a float32 kernel only. float64 (and erfc of float64) use a float64 kernel
built from Exp/Mul/Add/Div:
- |x| < 1.5: erf = 2/sqrt(pi) * x * exp(-x^2) * sum_n (2x^2)^n / (2n+1)!!, a series of positive
  terms (no cancellation), 25 terms;
- |x| >= 1.5: erfc = exp(-x^2)/sqrt(pi) * 2x / (2x^2 + 1 - 1*2/(2x^2 + 5 - 3*4/(2x^2 + 9 - ...))),
  the even part of Laplace's continued fraction, 40 levels evaluated bottom-up;
- exp(-x^2) is exp(-h^2) * exp(-(x-h)(x+h)) with h = x rounded to float32, so h^2 is exact.
Max relative error measured against mpmath: erf 5e-16, erfc 7e-15.

erf_inv: XLA's own kernel (Giles' polynomials in w = -log1p(-x*x), XLA's log1p and float32 log), rebuilt
op by op in :mod:`.random_float_kernels`, so that jax.random.normal and the samplers built on it draw
JAX's numbers: float32 bit for bit, float64 within a few ulps. That kernel is less accurate than it
could be near +-1 (x*x rounds before log1p: 3e-6 relative in float32, 1e-11 in float64 against
mpmath); matching JAX is the point here.
"""

from __future__ import annotations

import math

from jax2onnx.dtypes import F32, F64, FLOAT_MATH
from jax2onnx.plugin import Lowerings

from . import _numeric as nm
from . import complex_pairs as cp
from . import random_float_kernels as kernels
from .transcendental import Math

lowerings = Lowerings()

_SERIES_TERMS = 25
_FRACTION_DEPTH = 40
_SWITCH = 1.5
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

def _horner(m, coeffs, t):
    p = m.k(coeffs[0])
    for c in coeffs[1:]:
        p = m.op.Add(m.op.Mul(p, t), m.k(c))
    return p


def _exp_minus_square(m, a):
    """exp(-a^2) for float64 0 <= a <= 30 without the rounding of a*a (which exp magnifies by a^2)."""
    op = m.op
    h = m.ctx.cast(m.ctx.cast(a, F32), F64)
    return op.Mul(op.Exp(op.Neg(op.Mul(h, h))), op.Exp(op.Neg(op.Mul(op.Sub(a, h), op.Add(a, h)))))


def erf_kernel(m, a):
    """(erf(a), erfc(a), exp(-a^2)) in float64 for a >= 0."""
    op = m.op
    a = op.Min(a, m.k(30.0))  # erfc(30) underflows to 0 already; keeps inf out of inf * 0 (NaN passes)
    e = _exp_minus_square(m, a)
    z = op.Mul(m.k(2.0), op.Mul(a, a))
    coeffs, c = [], 1.0
    for n in range(_SERIES_TERMS):
        c = 1.0 if n == 0 else c / (2 * n + 1)
        coeffs.append(c)
    series = _horner(m, coeffs[::-1], z)
    erf_small = op.Mul(op.Mul(m.k(_TWO_OVER_SQRT_PI), a), op.Mul(e, series))
    t = op.Add(z, m.k(4 * _FRACTION_DEPTH + 1))
    for k in range(_FRACTION_DEPTH, 0, -1):
        t = op.Sub(op.Add(z, m.k(4 * k - 3)), op.Div(m.k((2 * k - 1) * (2 * k)), t))
    erfc_large = op.Div(op.Mul(op.Mul(m.k(_TWO_OVER_SQRT_PI), a), e), t)
    small = op.Less(a, m.k(_SWITCH))
    erf = op.Where(small, erf_small, op.Sub(m.k(1), erfc_large))
    erfc = op.Where(small, op.Sub(m.k(1), erf_small), erfc_large)
    return erf, erfc, e


@lowerings.register("erf", dtypes=FLOAT_MATH, complex=cp.unsupported)
def lower_erf(ctx, x):
    c = nm.dtype_of(ctx.avals_in[0])
    if c == F32:
        return ctx.op.Erf(x)
    m = Math(ctx, c)
    erf, _, _ = erf_kernel(m, m.op.Abs(x))
    return m.neg_if(m.op.Less(x, m.k(0)), erf)


#: erfc(x) exp(x^2) ~ c0 + a1 / (x + b1 + a2 / (x + b2 + a3 / (x + b3))) on [1, 9.3]; see the module doc.
_TAIL_C0 = -2.2668255260827243e-05
_TAIL_A = (0.5649443889881923, 0.3482751260996825, 14.04209579194339)
_TAIL_B = (0.018920052705499655, -2.2353190597362573, 4.881353186415882)


def erfc_float32(m, x):
    """erfc of a float32 ``x`` in 17 nodes (see the module doc). No clamp is needed: at x = inf the
    fraction is c0 (finite) and exp(-inf) = 0; the untaken branch's poles (x = -b3) are discarded."""
    op = m.op
    t = op.Add(x, m.k(_TAIL_B[2]))
    t = op.Add(op.Add(x, m.k(_TAIL_B[1])), op.Div(m.k(_TAIL_A[2]), t))
    t = op.Add(op.Add(x, m.k(_TAIL_B[0])), op.Div(m.k(_TAIL_A[1]), t))
    fraction = op.Add(m.k(_TAIL_C0), op.Div(m.k(_TAIL_A[0]), t))
    tail = op.Mul(op.Exp(op.Neg(op.Mul(x, x))), fraction)
    return op.Where(op.Less(x, m.k(1.0)), op.Sub(m.k(1.0), op.Erf(x)), tail)


@lowerings.register("erfc", dtypes=FLOAT_MATH, complex=cp.unsupported)
def lower_erfc(ctx, x):
    """float32: :func:`erfc_float32`; float64: the float64 kernel, erfc(-x) = 2 - erfc(x)."""
    if nm.dtype_of(ctx.avals_in[0]) == F32:
        return erfc_float32(Math(ctx, F32), x)
    m = Math(ctx, F64)
    _, erfc, _ = erf_kernel(m, m.op.Abs(x))
    return m.op.Where(m.op.Less(x, m.k(0)), m.op.Sub(m.k(2), erfc), erfc)


@lowerings.register("erf_inv", dtypes=FLOAT_MATH, complex=cp.unsupported)
def lower_erf_inv(ctx, x):
    """XLA's erf_inv (see :mod:`.random_float_kernels`); float32 is computed on float32 numbers
    carried in float64, each op rounded once to float32."""
    if nm.dtype_of(ctx.avals_in[0]) == F32:
        return kernels.on_float32(ctx, kernels.erf_inv, x)
    return kernels.on_float64(ctx, kernels.erf_inv, x)

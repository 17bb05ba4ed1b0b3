"""lax error functions: erf, erfc, erf_inv.

float32 erfc (exact GELU and the normal CDF reach it): core's 17-node form
(``jax2onnx.forms.erfc_float32``, shared with the rewrite stage): 1 - Erf(x) below 1,
as XLA computes it there; above, exp(-x*x) times a fitted continued fraction (constants derived by
packages/plugins-lax/tools/fit_erfc_tail.py).

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
from jax2onnx.forms import erfc_float32
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

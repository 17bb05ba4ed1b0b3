"""lax error functions: erf, erfc, erf_inv.

onnxruntime's Erf has a float32 kernel only. float64 (and erfc in every dtype, which 1 - Erf would
ruin for large x) use a float64 kernel built from Exp/Mul/Add/Div:
- |x| < 1.5: erf = 2/sqrt(pi) * x * exp(-x^2) * sum_n (2x^2)^n / (2n+1)!!, a series of positive
  terms (no cancellation), 25 terms;
- |x| >= 1.5: erfc = exp(-x^2)/sqrt(pi) * 2x / (2x^2 + 1 - 1*2/(2x^2 + 5 - 3*4/(2x^2 + 9 - ...))),
  the even part of Laplace's continued fraction, 40 levels evaluated bottom-up;
- exp(-x^2) is exp(-h^2) * exp(-(x-h)(x+h)) with h = x rounded to float32, so h^2 is exact.
Max relative error measured against mpmath: erf 5e-16, erfc 7e-15.

erf_inv: float32 is M. Giles' single-precision polynomial ("Approximating the erfinv function",
GPU Computing Gems, 2011) in w = -log((1-x)(1+x)), as XLA uses. float64 takes that polynomial (or an
asymptotic guess for w >= 16, beyond its fitted range) and one Halley step with the float64 kernel,
on erf(y) - x for |x| < 0.5 and on (1 - x) - erfc(y) above: measured 4e-15 relative.
"""

from __future__ import annotations

import math

import jax
import numpy as np
from jax import lax
from jax2onnx.dtypes import F32, F64, FLOAT_MATH
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import _numeric as nm
from . import complex_pairs as cp
from ._testdata import SPECIAL, f32, log_scale, uniform
from .transcendental import Math

lowerings = Lowerings()

_SERIES_TERMS = 25
_FRACTION_DEPTH = 40
_SWITCH = 1.5
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)

#: Giles' erfinv polynomials (single precision): w < 5 in (w - 2.5), else in (sqrt(w) - 3).
_GILES_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                  -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
               -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)


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


@lowerings.register("erfc", dtypes={F64}, complex=cp.unsupported)
def lower_erfc(ctx, x):
    """Always the float64 kernel (core casts other floats there and rounds once back):
    erfc(-x) = 2 - erfc(x)."""
    m = Math(ctx, F64)
    _, erfc, _ = erf_kernel(m, m.op.Abs(x))
    return m.op.Where(m.op.Less(x, m.k(0)), m.op.Sub(m.k(2), erfc), erfc)


def _giles(m, x, w):
    op = m.op
    central = _horner(m, _GILES_CENTRAL, op.Sub(w, m.k(2.5)))
    tail = _horner(m, _GILES_TAIL, op.Sub(op.Sqrt(w), m.k(3.0)))
    return op.Mul(op.Where(op.Less(w, m.k(5.0)), central, tail), x)


def _asymptotic_guess(m, q):
    """y with erfc(y) = q for tiny q: y^2 = -log(q) - log(y sqrt(pi)) + log(1 - r + 3r^2 - 15r^3),
    r = 1/(2y^2) (the asymptotic series of erfc), iterated from y = sqrt(-log q)."""
    op = m.op
    neg_log_q = op.Neg(op.Log(q))
    y = op.Sqrt(neg_log_q)
    for _ in range(4):
        r = op.Div(m.k(0.5), op.Mul(y, y))
        series = _horner(m, (-15.0, 3.0, -1.0, 1.0), r)
        y2 = op.Add(op.Sub(neg_log_q, op.Log(op.Mul(y, m.k(math.sqrt(math.pi))))), op.Log(series))
        y = op.Sqrt(op.Max(y2, m.k(0.25)))
    return y


@lowerings.register("erf_inv", dtypes=FLOAT_MATH, complex=cp.unsupported)
def lower_erf_inv(ctx, x):
    c = nm.dtype_of(ctx.avals_in[0])
    m = Math(ctx, c)
    op = m.op
    a = op.Abs(x)
    w = op.Neg(op.Log(op.Mul(op.Sub(m.k(1), a), op.Add(m.k(1), a))))
    if c == F32:
        r = _giles(m, a, w)
    else:
        q = op.Sub(m.k(1), a)  # exact for a >= 0.5, where it is used
        guess = op.Where(op.Less(w, m.k(16.0)), _giles(m, a, w), _asymptotic_guess(m, q))
        erf, erfc, e = erf_kernel(m, guess)
        residual = op.Where(op.Less(a, m.k(0.5)), op.Sub(erf, a), op.Sub(q, erfc))
        u = op.Div(residual, op.Mul(m.k(_TWO_OVER_SQRT_PI), e))
        r = op.Sub(guess, op.Div(u, op.Add(m.k(1), op.Mul(guess, u))))
    r = op.Where(op.Equal(a, m.k(1)), m.k(np.inf), r)  # the polynomials give -inf or NaN there
    return m.neg_if(op.Less(x, m.k(0)), r)


# ---------------------------------------------------------------------------------------------
# Testcases

_TIGHT = dict(atol=1e-30, atol_f64=1e-300, rtol=2e-6, rtol_f64=1e-13)
# JAX's own erf_inv is less accurate near +-1 (w = -log1p(-x*x) rounds x*x; its float64 polynomials
# too): against mpmath it is off by 3e-6 (float32) and 1e-11 (float64) where ours is within 4e-15.
_NEAR_ONE_TOL = dict(atol=1e-30, atol_f64=1e-300, rtol=1e-5, rtol_f64=1e-10)
_NEAR_ONE = f32(0.9, 0.99, 0.999, 0.9999, 0.99999, 0.999999, 0.9999999, -0.9999999, 1.0, -1.0, 1.5, 0.0, np.nan)


def _bf16(fn):
    return lambda x: fn(x.astype(jax.numpy.bfloat16)).astype(x.dtype)


components = [
    Component("lax.erf", onnx=["Erf"], since="v0.7.0", testcases=[
        Testcase("erf", lax.erf, [("B", 6)], input_generator=uniform(-4, 4), **_TIGHT),
        Testcase("erf_tiny", lax.erf, [("B", 6)], input_generator=log_scale(-30, -1), **_TIGHT),
        Testcase("erf_special_values", lax.erf, input_values=[SPECIAL], **_TIGHT),
        Testcase("erf_bfloat16", _bf16(lax.erf), [("B", 6)], rtol=2e-2, atol=1e-2, rtol_f64=2e-2, atol_f64=1e-2),
        Testcase("gelu_exact", lambda x: jax.nn.gelu(x, approximate=False), [("B", 6)], rtol_f64=1e-12),
    ]),
    Component("lax.erfc", onnx=["Exp", "Div"], since="v0.7.0", testcases=[
        Testcase("erfc", lax.erfc, [("B", 6)], input_generator=uniform(-4, 4), **_TIGHT),
        # large x: erfc is tiny and 1 - erf(x) would be 0
        Testcase("erfc_tail", lax.erfc, [("B", 6)], input_generator=uniform(2, 9), **_TIGHT),
        Testcase("erfc_special_values", lax.erfc, input_values=[SPECIAL], **_TIGHT),
    ]),
    Component("lax.erf_inv", onnx=["Log", "Sqrt", "Where"], since="v0.7.0", testcases=[
        Testcase("erf_inv", lax.erf_inv, [("B", 6)], input_generator=uniform(-0.99, 0.99), **_TIGHT),
        Testcase("erf_inv_near_one", lax.erf_inv, input_values=[_NEAR_ONE], **_NEAR_ONE_TOL),
        Testcase("erf_inv_tiny", lax.erf_inv, [("B", 6)], input_generator=log_scale(-30, -1), **_TIGHT),
        # 1 - d is formed in the graph: in float64 it reaches past float32's last value below 1
        Testcase("erf_inv_extremes", lambda d: lax.erf_inv(1 - d), input_values=[f32(2.0**-52, 1e-12, 1e-9, 3e-16,
                                                                                     2e-16)],
                 **_NEAR_ONE_TOL),
        Testcase("erf_inv_bfloat16", _bf16(lax.erf_inv), [("B", 6)], input_generator=uniform(-0.9, 0.9),
                 rtol=2e-2, atol=1e-2, rtol_f64=2e-2, atol_f64=1e-2),
    ]),
]

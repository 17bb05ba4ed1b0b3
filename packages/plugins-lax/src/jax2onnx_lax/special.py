"""lax error functions: erf, erfc, erf_inv.

onnxruntime's Erf has a float32 kernel only. float64 (and erfc in every dtype, which 1 - Erf would
ruin for large x) use a float64 kernel built from Exp/Mul/Add/Div:
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

import jax
import numpy as np
from jax import lax
from jax2onnx.dtypes import F32, F64, FLOAT_MATH
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import _numeric as nm
from . import complex_pairs as cp
from . import random_float_kernels as kernels
from ._testdata import SPECIAL, f32, log_scale, uniform
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


@lowerings.register("erfc", dtypes={F64}, complex=cp.unsupported)
def lower_erfc(ctx, x):
    """Always the float64 kernel (core casts other floats there and rounds once back):
    erfc(-x) = 2 - erfc(x)."""
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


# ---------------------------------------------------------------------------------------------
# Testcases

_TIGHT = dict(atol=1e-30, atol_f64=1e-300, rtol=2e-6, rtol_f64=1e-13)
#: erf_inv is XLA's kernel: float32 is bitwise a default jax.jit's on a CPU with FMA (XLA contracts
#: a*b + c there; tests/test_random_kernels.py checks 2**16 inputs bit for bit). The test session
#: compiles JAX at -O0, without that contraction: 2 ulps (1.9e-7 relative) measured against it.
#: float64: max 3 ulps (onnxruntime's Log, no FMA in float64).
_ERF_INV_ULPS = kernels.ulp_tolerance(2, 4)
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
        Testcase("erf_inv", lax.erf_inv, [("B", 6)], input_generator=uniform(-0.99, 0.99), **_ERF_INV_ULPS),
        Testcase("erf_inv_near_one", lax.erf_inv, input_values=[_NEAR_ONE], **_ERF_INV_ULPS),
        Testcase("erf_inv_tiny", lax.erf_inv, [("B", 6)], input_generator=log_scale(-30, -1), **_ERF_INV_ULPS),
        # 1 - d is formed in the graph: in float64 it reaches past float32's last value below 1
        Testcase("erf_inv_extremes", lambda d: lax.erf_inv(1 - d), input_values=[f32(2.0**-52, 1e-12, 1e-9, 3e-16,
                                                                                     2e-16)],
                 **_ERF_INV_ULPS),
        Testcase("erf_inv_bfloat16", _bf16(lax.erf_inv), [("B", 6)], input_generator=uniform(-0.9, 0.9),
                 rtol=2e-2, atol=1e-2, rtol_f64=2e-2, atol_f64=1e-2),
    ]),
]

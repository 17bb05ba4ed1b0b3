"""Testcases of :mod:`jax2onnx_lax.special_functions` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import math

import jax
import jax.scipy.special as jsp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ._testdata import SPECIAL, f32, log_scale, uniform

_TOL = dict(rtol=2e-6, atol=1e-6, rtol_f64=1e-12, atol_f64=1e-13)


_LOOSE = dict(rtol=1e-5, atol=1e-6, rtol_f64=1e-10, atol_f64=1e-12)


_NEGATIVE = f32(-0.5, -1.5, -2.25, -3.75, -10.1, -0.999, -1e-3, 1e-3, 0.25, -50.5)


_POLES = f32(0.0, -0.0, -1.0, -2.0, -30.0, np.inf, -np.inf, np.nan, 1.0, 2.0, 3.0, 1e30)


def _positive(lo, hi):
    return log_scale(math.log10(lo), math.log10(hi), signed=False)


def _per_input(*gens):
    """Input i drawn from ``gens[i]`` (the runner calls the generator once per input, in order)."""
    state = {"i": 0}

    def gen(rng, shape, dtype):
        g = gens[state["i"] % len(gens)]
        state["i"] += 1
        return g(rng, shape, dtype)

    return gen


def _polygamma(n):
    return lambda x: jsp.polygamma(n, x)


components = [
    Component("lax.lgamma", onnx=["Log", "Sin", "Where"], since="v0.8.0", testcases=[
        Testcase("lgamma", lax.lgamma, [("B", 8)], input_generator=_positive(1e-3, 1e3), **_TOL),
        Testcase("lgamma_negative", lax.lgamma, input_values=[_NEGATIVE], **_LOOSE),
        Testcase("lgamma_poles", lax.lgamma, input_values=[_POLES], **_TOL),
        Testcase("gammaln_scipy", jsp.gammaln, [(12,)], input_generator=uniform(0.1, 30.0), **_TOL),
        Testcase("gamma", jsp.gamma, [(12,)], input_generator=uniform(-4.5, 8.0), **_LOOSE),
        Testcase("betaln", jsp.betaln, [(8,), (8,)], input_generator=uniform(0.2, 20.0), **_LOOSE),
    ]),
    Component("lax.digamma", onnx=["Log", "Sin", "Cos", "Reciprocal"], since="v0.8.0", testcases=[
        Testcase("digamma", lax.digamma, [("B", 8)], input_generator=_positive(1e-3, 1e4), **_TOL),
        Testcase("digamma_negative", lax.digamma, input_values=[_NEGATIVE], **_LOOSE),
        Testcase("digamma_poles", lax.digamma, input_values=[_POLES], **_TOL),
    ]),
    Component("lax.polygamma", onnx=["Pow", "Exp"], since="v0.8.0", testcases=[
        Testcase("polygamma_1", _polygamma(1), [("B", 6)], input_generator=uniform(0.05, 20.0), **_LOOSE),
        Testcase("polygamma_3", _polygamma(3), [("B", 6)], input_generator=uniform(0.3, 20.0), **_LOOSE),
        Testcase("polygamma_0", _polygamma(0), [("B", 6)], input_generator=uniform(0.1, 20.0), **_LOOSE),
    ]),
    Component("lax.zeta", onnx=["Pow"], since="v0.8.0", testcases=[
        Testcase("zeta", jsp.zeta, [("B", 6), ("B", 6)], input_generator=_per_input(uniform(1.1, 12.0), uniform(0.05, 30.0)),
                 **_LOOSE),
        Testcase("zeta_edges", jsp.zeta, input_values=[f32(1.0, 0.5, 2.0, 2.0, 2.0, 3.0, np.nan, 4.0),
                                                       f32(1.0, 1.0, 0.0, -1.0, -1.5, -2.5, 1.0, 1e4)], **_LOOSE),
    ]),
    Component("lax.bessel_i1e", onnx=["Exp", "Sqrt"], since="v0.8.0", testcases=[
        Testcase("bessel_i1e", jsp.i1e, [("B", 8)], input_generator=log_scale(-4, 3), **_TOL),
        Testcase("bessel_i1e_special_values", jsp.i1e, input_values=[SPECIAL], **_TOL),
        Testcase("bessel_i1", jsp.i1, [(12,)], input_generator=uniform(-30.0, 30.0), **_TOL),
    ]),
    Component("lax.bessel_i0e", onnx=["Exp", "Sqrt"], since="v0.8.0", testcases=[
        Testcase("bessel_i0e", jsp.i0e, [("B", 8)], input_generator=log_scale(-4, 3), **_TOL),
        Testcase("bessel_i0e_special_values", jsp.i0e, input_values=[SPECIAL], **_TOL),
        Testcase("bessel_i0", jsp.i0, [(12,)], input_generator=uniform(-30.0, 30.0), **_TOL),
    ]),
    Component("lax.igamma", onnx=["Loop"], since="v0.8.0", testcases=[
        Testcase("gammainc", jsp.gammainc, [("B", 6), ("B", 6)], input_generator=_positive(1e-2, 50.0), run_static=False,
                 **_TOL),
        Testcase("gammaincc", jsp.gammaincc, [("B", 6), ("B", 6)], input_generator=_positive(1e-2, 50.0),
                 run_static=False, **_TOL),
        Testcase("gammainc_edges", jsp.gammainc, input_values=[f32(0, 0, 1, -1, 1, 2, np.inf, 1, 1, 3),
                                                               f32(0, 1, 0, 1, -1, np.inf, 1, np.nan, 1e-30, 1e-3)],
                 **_TOL),
        Testcase("gammaincc_edges", jsp.gammaincc, input_values=[f32(0, 0, 1, -1, 1, 2, np.inf, 1, 1, 3),
                                                                 f32(0, 1, 0, 1, -1, np.inf, 1, np.nan, 1e-30, 1e-3)],
                 **_TOL),
        Testcase("gammainc_grad_a", jax.vmap(jax.grad(jsp.gammainc)), [(6,), (6,)],
                 input_generator=_positive(0.1, 20.0), **_LOOSE),
        Testcase("chi2_cdf", lambda x: jax.scipy.stats.chi2.cdf(x, 3.0), [(8,)], input_generator=uniform(0.0, 10.0),
                 **_TOL),
    ]),
    Component("lax.regularized_incomplete_beta", onnx=["Loop"], since="v0.8.0", testcases=[
        Testcase("betainc", jsp.betainc, [("B",), ("B",), ("B",)],
                 input_generator=_per_input(uniform(0.2, 10.0), uniform(0.2, 10.0), uniform(0.0, 1.0)),
                 run_static=False, **_LOOSE),
        Testcase("betainc_edges", jsp.betainc, input_values=[f32(1, 2, 0, 1, -1, 1), f32(1, 3, 1, 0, 1, 1),
                                                             f32(0, 1, 0.5, 0.5, 0.5, 1.5)], **_TOL),
        Testcase("beta_cdf", lambda x: jax.scipy.stats.beta.cdf(x, 2.0, 5.0), [(8,)],
                 input_generator=uniform(0.0, 1.0), **_LOOSE),
    ]),
]

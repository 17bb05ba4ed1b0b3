"""Testcases of :mod:`jax2onnx_lax.linalg_factor` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

_RNG_TOL = dict(rtol=1e-4, atol=1e-5, rtol_f64=1e-10, atol_f64=1e-11)


def _well_conditioned(rng, shape, dtype):
    """Random matrices with a boosted diagonal (condition number ~10): tight tolerances hold."""
    a = rng.standard_normal(shape)
    return a + 3.0 * np.eye(shape[-2], shape[-1])


def _spd(rng, shape, dtype):
    """Symmetric positive definite for a square operand; a right-hand side stays standard normal."""
    a = rng.standard_normal(shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        return a
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _with_zero_pivot(x):
    # a column of zeros at the diagonal: getrf leaves it unpivoted and unscaled
    return lax.linalg.lu(x.at[..., :, 1].set(0.0))


def _lu_solve(a, b):
    return jsl.lu_solve(jsl.lu_factor(a), b)


def _cho_solve(a, b):
    return jsl.cho_solve(jsl.cho_factor(a, lower=True), b)


def _cho_solve_upper(a, b):
    return jsl.cho_solve(jsl.cho_factor(a, lower=False), b)


def _not_pd(x):
    return jnp.linalg.cholesky(x - 100.0 * jnp.eye(x.shape[-1], dtype=x.dtype))


def _qr(mode):
    return lambda x: jnp.linalg.qr(x, mode=mode)


def _sym(rng, shape, dtype):
    a = rng.standard_normal(shape)
    return a + np.swapaxes(a, -1, -2)


def _tridiagonal(lower):
    return lambda a: lax.linalg.tridiagonal(a, lower=lower)


components = [
    Component("lax.linalg.lu", onnx=["ArgMax", "GatherND", "Where", "Loop"], since="v0.8.0", testcases=[
        Testcase("lu", lax.linalg.lu, [(4, 4)], **_RNG_TOL),
        Testcase("lu_batched", lax.linalg.lu, [("B", 3, 3)], **_RNG_TOL),
        Testcase("lu_tall", lax.linalg.lu, [(5, 3)], **_RNG_TOL),
        Testcase("lu_wide", lax.linalg.lu, [(2, 3, 5)], **_RNG_TOL),
        Testcase("lu_zero_column", _with_zero_pivot, [(4, 4)], **_RNG_TOL),
        Testcase("lu_factor", jsl.lu_factor, [(4, 4)], **_RNG_TOL),
        Testcase("lu_scipy_plu", jsl.lu, [(4, 4)], **_RNG_TOL),
        Testcase("lu_solve", _lu_solve, [(4, 4), (4, 2)], input_generator=_well_conditioned, **_RNG_TOL),
    ]),
    Component("lax.linalg.lu_pivots_to_permutation", onnx=["Loop"], since="v0.8.0", testcases=[
        Testcase("lu_pivots_to_permutation", lambda p: lax.linalg.lu_pivots_to_permutation(p, 5),
                 [jax.ShapeDtypeStruct(("B", 3), jnp.int32)],
                 input_generator=lambda rng, shape, dt: np.stack(
                     [rng.integers(np.arange(shape[-1]), 5) for _ in range(int(np.prod(shape[:-1])))]
                 ).reshape(shape)),
    ]),
    Component("lax.linalg.cholesky", onnx=["Sqrt", "Slice", "Loop"], since="v0.8.0", testcases=[
        Testcase("cholesky", jnp.linalg.cholesky, [(4, 4)], input_generator=_spd, **_RNG_TOL),
        Testcase("cholesky_batched", jnp.linalg.cholesky, [("B", 5, 5)], input_generator=_spd, **_RNG_TOL),
        Testcase("cholesky_not_positive_definite", _not_pd, [(3, 3)], input_generator=_spd, **_RNG_TOL),
        Testcase("cho_solve", _cho_solve, [(4, 4), (4, 3)], input_generator=_spd, **_RNG_TOL),
        Testcase("cho_solve_upper", _cho_solve_upper, [(4, 4), (4,)], input_generator=_spd, **_RNG_TOL),
    ]),
    Component("lax.linalg.qr", onnx=["MatMul", "Sqrt", "Slice", "Loop"], since="v0.8.0", testcases=[
        Testcase("qr", jnp.linalg.qr, [(4, 4)], **_RNG_TOL),
        Testcase("qr_tall_reduced", _qr("reduced"), [("B", 5, 3)], **_RNG_TOL),
        Testcase("qr_tall_complete", _qr("complete"), [(5, 3)], **_RNG_TOL),
        Testcase("qr_wide", _qr("reduced"), [(3, 5)], **_RNG_TOL),
        Testcase("qr_r_only", _qr("r"), [(2, 4, 4)], **_RNG_TOL),
        # any reflectors and taus are valid input to orgqr
        Testcase("householder_product", lax.linalg.householder_product, [("B", 5, 3), ("B", 3)], **_RNG_TOL),
    ]),
    Component("lax.linalg.hessenberg", onnx=["Loop", "MatMul"], since="v0.8.0", testcases=[
        Testcase("hessenberg", lax.linalg.hessenberg, [(5, 5)], **_RNG_TOL),
        Testcase("hessenberg_batched", lax.linalg.hessenberg, [("B", 4, 4)], **_RNG_TOL),
        # scipy's form: H and Q (householder_product of the reflectors), signs as LAPACK's
        Testcase("hessenberg_scipy_with_q", lambda a: jsl.hessenberg(a, calc_q=True), [(5, 5)], **_RNG_TOL),
    ]),
    Component("lax.linalg.tridiagonal", onnx=["Loop", "MatMul"], since="v0.8.0", testcases=[
        # the triangle not read is random, not symmetric: it must come back unchanged
        Testcase("tridiagonal_lower", _tridiagonal(True), [(5, 5)], **_RNG_TOL),
        Testcase("tridiagonal_upper", _tridiagonal(False), [("B", 4, 4)], **_RNG_TOL),
        Testcase("tridiagonal_symmetric", _tridiagonal(True), [(4, 4)], input_generator=_sym, **_RNG_TOL),
    ]),
]

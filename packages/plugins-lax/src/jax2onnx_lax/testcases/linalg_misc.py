"""Testcases of :mod:`jax2onnx_lax.linalg_misc` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jax import lax
from jax2onnx.testing import Component, Testcase


def _chol_update(a, w):
    r = jnp.linalg.cholesky(a @ a.T + 4.0 * jnp.eye(a.shape[-1], dtype=a.dtype)).T  # upper factor
    return lax.linalg.cholesky_update(r, w)


def _ormqr(left, transpose):
    # any reflectors and taus are valid input (as for householder_product)
    return lambda a, taus, c: lax.linalg.ormqr(a, taus, c, left=left, transpose=transpose)


_TOL = dict(rtol=1e-4, atol=1e-5, rtol_f64=1e-10, atol_f64=1e-11)


def _moderate(rng, shape, dtype):
    """Entries of order 1 with a spread of eigenvalues: expm's Pade degree/scaling selection varies."""
    return rng.standard_normal(shape) * 0.8


components = [
    Component("lax.platform_index", onnx=["If"], since="v0.8.0", testcases=[
        # slogdet/det of n >= 4 choose a reduction branch per platform (lu inside)
        Testcase("det", jnp.linalg.det, [(4, 4)], **_TOL),
        Testcase("det_batched", jnp.linalg.det, [("B", 5, 5)], **_TOL),
        Testcase("slogdet", jnp.linalg.slogdet, [(2, 5, 5)], **_TOL),
        Testcase("tensorinv", lambda a: jnp.linalg.tensorinv(a.reshape(4, 2, 2), 1), [(4, 4)], **_TOL),
        Testcase("expm", jsl.expm, [(4, 4)], input_generator=_moderate, rtol=5e-4, atol=5e-5, rtol_f64=1e-9,
                 atol_f64=1e-10),
        Testcase("expm_large_norm", lambda a: jsl.expm(3.0 * a), [(3, 3)], rtol=5e-4, atol=5e-4, rtol_f64=1e-9,
                 atol_f64=1e-9),
    ]),
    Component("lax.linalg.cholesky_update", onnx=["Loop"], since="v0.8.0", testcases=[
        Testcase("cholesky_update", _chol_update, [(4, 4), (4,)], **_TOL),
    ]),
    Component("lax.linalg.symmetric_product", onnx=["MatMul"], since="v0.8.0", testcases=[
        Testcase("symmetric_product", lambda a, c: lax.linalg.symmetric_product(a, c, alpha=2.0, beta=0.5),
                 [("B", 4, 3), ("B", 4, 4)], **_TOL),
    ]),
    Component("lax.linalg.ormqr", onnx=["MatMul"], since="v0.8.0", testcases=[
        Testcase("ormqr_left", _ormqr(True, False), [(5, 3), (3,), (5, 2)], **_TOL),
        Testcase("ormqr_left_transpose", _ormqr(True, True), [("B", 5, 3), ("B", 3), ("B", 5, 2)], **_TOL),
        Testcase("ormqr_right", _ormqr(False, False), [(5, 3), (3,), (2, 5)], **_TOL),
    ]),
]

"""Testcases of :mod:`jax2onnx_lax.linalg_schur` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase


def _eigvals(x):
    w = jnp.linalg.eigvals(x)
    return w.real, w.imag


def _eigvals_sorted(x):
    w = jnp.linalg.eigvals(x)
    order = jnp.lexsort((w.imag, w.real), axis=-1)
    return jnp.take_along_axis(w.real, order, axis=-1), jnp.take_along_axis(w.imag, order, axis=-1)


def _dephase(re, im):
    """Columns of ``re + i im`` times the conjugate phase of their largest-magnitude entry."""
    idx = jnp.argmax(re * re + im * im, axis=-2, keepdims=True)
    pr, pi = jnp.take_along_axis(re, idx, axis=-2), jnp.take_along_axis(im, idx, axis=-2)
    r = jnp.sqrt(pr * pr + pi * pi)
    return (re * pr + im * pi) / r, (im * pr - re * pi) / r


def _eig_right(x):
    w, v = jnp.linalg.eig(x)
    return (w.real, w.imag, *_dephase(v.real, v.imag))


def _eig_left(x):
    w, vl = lax.linalg.eig(x, compute_left_eigenvectors=True, compute_right_eigenvectors=False)
    return (w.real, w.imag, *_dephase(vl.real, vl.imag))


def _eig_both(x):
    w, vl, vr = lax.linalg.eig(x, compute_left_eigenvectors=True)
    return (w.real, *_dephase(vl.real, vl.imag), *_dephase(vr.real, vr.imag))


def _t_parts(t):
    sub = jnp.diagonal(t, -1, axis1=-2, axis2=-1)
    sup = jnp.diagonal(t, 1, axis1=-2, axis2=-1)
    return jnp.tril(t, -2), jnp.diagonal(t, axis1=-2, axis2=-1), sub * sup


def _schur_parts(x):
    t, z = lax.linalg.schur(x)
    zt = jnp.swapaxes(z, -1, -2)
    return (z @ t @ zt, zt @ z, *_t_parts(t))


def _schur_scipy(x):
    t, z = jax.scipy.linalg.schur(x, output="real")
    return (z @ t @ z.T, *_t_parts(t))


def _schur_no_vectors(x):
    (t,) = lax.linalg.schur(x, compute_schur_vectors=False)
    return _t_parts(t)


def _real_spectrum(rng, shape, dtype):
    """``S diag(1..n) S^-1``: distinct real eigenvalues, a non-normal matrix."""
    n = shape[-1]
    s = np.eye(n) + 0.3 * rng.standard_normal(shape)
    return s @ np.diag(np.arange(1.0, n + 1)) @ np.linalg.inv(s)


def _lower_triangular(rng, shape, dtype):
    """Eigenvalues isolated by dgebal's permutation (their order comes from it, not from QR)."""
    return np.tril(rng.standard_normal(shape))


def _first_lower_triangular(rng, shape, dtype):
    """A random batch whose first matrix is lower triangular (see :func:`_lower_triangular`)."""
    a = rng.standard_normal(shape)
    a[0] = np.tril(a[0])
    return a


def _graded(rng, shape, dtype):
    """Rows and columns scaled over 4 decades: dgebal's scaling changes the result."""
    n = shape[-1]
    d = np.logspace(-2, 2, n)
    return rng.standard_normal(shape) * d[:, None] / d[None, :]


def _balancing_cases(rng, shape, dtype):
    """One matrix of each kind dgebal treats differently (a ``[3, n, n]`` batch): distinct real
    eigenvalues of a non-normal matrix, eigenvalues isolated by the permutation (a lower
    triangle), rows and columns graded over 4 decades (the scaling changes the result)."""
    one = shape[1:]
    return np.stack([_real_spectrum(rng, one, dtype), _lower_triangular(rng, one, dtype), _graded(rng, one, dtype)])


def _rotation_pair(rng, shape, dtype):
    """A 2x2 with a complex pair."""
    a = rng.standard_normal(shape)
    a[..., 0, 1], a[..., 1, 0] = np.abs(a[..., 0, 1]) + 0.5, -np.abs(a[..., 1, 0]) - 0.5
    return a


_TOL = dict(rtol=1e-3, atol=1e-4, rtol_f64=1e-8, atol_f64=1e-9)


components = [
    Component("lax.linalg.eig", onnx=["Loop", "If"], since="v0.8.0", testcases=[
        Testcase("eigvals_order", _eigvals, [(5, 5)], **_TOL),
        Testcase("eigvals_sorted_batched", _eigvals_sorted, [("B", 4, 4)], **_TOL),
        Testcase("eig_vectors", _eig_right, [(6, 6)], **_TOL),
        Testcase("eig_left_vectors", _eig_left, [(5, 5)], **_TOL),
        Testcase("eig_left_right", _eig_both, [(2, 4, 4)], **_TOL),
        Testcase("eig_1x1", _eig_right, [(1, 1)], **_TOL),
        Testcase("eig_2x2_complex_pair", _eig_right, [(2, 2)], input_generator=_rotation_pair, **_TOL),
        # the three in one batched export (each eig export costs seconds at three opsets)
        Testcase("eig_balancing_cases", _eig_right, [(3, 5, 5)], input_generator=_balancing_cases, **_TOL),
        Testcase("eigvals_8x8", _eigvals, [(8, 8)], **_TOL),
    ]),
    Component("lax.linalg.schur", onnx=["Loop", "If"], since="v0.8.0", testcases=[
        Testcase("schur", _schur_parts, [(6, 6)], **_TOL),
        Testcase("schur_batched", _schur_parts, [("B", 4, 4)], input_generator=_first_lower_triangular, **_TOL),
        Testcase("schur_scipy_real", _schur_scipy, [(5, 5)], **_TOL),
        Testcase("schur_no_vectors", _schur_no_vectors, [(5, 5)], **_TOL),
        Testcase("schur_1x1", _schur_parts, [(1, 1)], **_TOL),
        Testcase("schur_2x2", _schur_parts, [(2, 2)], input_generator=_rotation_pair, **_TOL),
    ]),
]

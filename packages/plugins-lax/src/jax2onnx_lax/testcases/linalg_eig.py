"""Testcases of :mod:`jax2onnx_lax.linalg_eig` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.testing import Component, Testcase


def _column_signs(vectors):
    """+-1 per column ([..., 1, k]) that makes the column's largest-magnitude entry positive."""
    idx = jnp.argmax(jnp.abs(vectors), axis=-2, keepdims=True)
    pivot = jnp.take_along_axis(vectors, idx, axis=-2)
    return jnp.where(pivot < 0, -1.0, 1.0).astype(vectors.dtype)


def _fix_signs(vectors):
    return vectors * _column_signs(vectors)


def _eigh(x):
    w, v = jnp.linalg.eigh(x)
    return w, _fix_signs(v)


def _eigh_scaled(factor):
    """eigh of ``x * factor``, its eigenvalues scaled back: entries far from 1 (float32 sums of
    their squares overflow or underflow), compared in the normal range."""

    def fn(x):
        w, v = jnp.linalg.eigh(x * jnp.asarray(factor, x.dtype))
        return w * jnp.asarray(1.0 / factor, x.dtype), _fix_signs(v)

    return fn


def _svd_scaled(factor):
    def fn(x):
        u, s, vt = jnp.linalg.svd(x * jnp.asarray(factor, x.dtype), full_matrices=False)
        flip = _column_signs(jnp.swapaxes(vt, -1, -2))
        return s * jnp.asarray(1.0 / factor, x.dtype), u * flip, vt * jnp.swapaxes(flip, -1, -2)

    return fn


def _eigh_upper(x):
    w, v = jnp.linalg.eigh(x, UPLO="U", symmetrize_input=False)
    return w, _fix_signs(v)


def _eigh_reconstruct(x):
    w, v = jnp.linalg.eigh(x)
    return (v * w[..., None, :]) @ jnp.swapaxes(v, -1, -2), jnp.swapaxes(v, -1, -2) @ v


def _svd(full):
    def fn(x):
        u, s, vt = jnp.linalg.svd(x, full_matrices=full)
        k = s.shape[-1]
        # a pair (u_i, v_i) flips together: fix the sign on v and carry it to u
        flip = _column_signs(jnp.swapaxes(vt[..., :k, :], -1, -2))  # [..., 1, k]
        u_thin = u[..., :, :k] * flip
        out = [s, u_thin, vt[..., :k, :] * jnp.swapaxes(flip, -1, -2)]
        if full and u.shape[-1] > k:  # the completion is any orthonormal basis: compare projections
            rest = u[..., :, k:]
            out.append(rest @ jnp.swapaxes(rest, -1, -2))
        if full and vt.shape[-2] > k:
            rest = vt[..., k:, :]
            out.append(jnp.swapaxes(rest, -1, -2) @ rest)
        return tuple(out)

    return fn


def _sym(rng, shape, dtype):
    a = rng.standard_normal(shape)
    return a + np.swapaxes(a, -1, -2) if len(shape) >= 2 and shape[-1] == shape[-2] else a


#: The ops of the Jacobi rounds up to 128x128 (larger matrices rotate rows: Gather, Mul, Add).
_JACOBI_OPS = ["Loop", "GatherElements", "LpNormalization", "ScatterElements", "MatMul", "TopK"]

_TOL = dict(rtol=2e-4, atol=2e-5, rtol_f64=1e-9, atol_f64=1e-10)


def _diagonal(rng, shape, dtype):
    """Diagonal matrices with mixed signs and distinct magnitudes: nothing to rotate."""
    d = rng.permutation(np.arange(1, shape[-1] + 1)) * rng.choice([-1.0, 1.0], shape[-1])
    return np.broadcast_to(np.diag(d), shape).copy()


def _with_zero_first(rng, shape, dtype):
    """Random rows or columns with a zero first entry (LAPACK's reflector takes ``sign(0) = 1``)."""
    a = rng.standard_normal(shape)
    a[..., 0, 0] = 0.0
    return a


#: Where LAPACK's signs are determined, the vectors are compared as they come (no sign fixing):
#: a 1x1 matrix (eigenvector 1; u = sign(a), vt = 1), a diagonal eigh (V a permutation of I), and
#: a single row or column (gesdd's QR/LQ of the vector: see linalg_eig._vector_sign).
_EXACT_SIGN_CASES = {
    "eigh": [
        Testcase("eigh_1x1_published", lambda x: jax.lax.linalg.eigh(x, lower=True, symmetrize_input=False),
                 input_values=[np.asarray([[2.5]], np.float32)], run_f64=False),
        Testcase("eigh_1x1_signs", jnp.linalg.eigh, [("B", 1, 1)], **_TOL),
        Testcase("eigh_diagonal_signs", jnp.linalg.eigh, [(5, 5)], input_generator=_diagonal, **_TOL),
    ],
    "svd": [
        Testcase("svd_1x1_published", jax.lax.linalg.svd, input_values=[np.asarray([[-2.0]], np.float32)],
                 run_f64=False),
        Testcase("svd_1x1_signs", jnp.linalg.svd, [("B", 1, 1)], **_TOL),
        Testcase("svd_column_signs", lambda x: jnp.linalg.svd(x, full_matrices=False), [("B", 4, 1)], **_TOL),
        Testcase("svd_row_signs", lambda x: jnp.linalg.svd(x, full_matrices=False), [("B", 1, 4)], **_TOL),
        Testcase("svd_zero_vectors_signs", lambda a, b, c: (jnp.linalg.svd(a), jnp.linalg.svd(b, full_matrices=False),
                                                              jnp.linalg.svd(c, full_matrices=False)),
                 [(1, 1), (3, 1), (1, 3)], input_generator=lambda rng, shape, dtype: np.zeros(shape), **_TOL),
        Testcase("svd_row_zero_first_signs", lambda x: jnp.linalg.svd(x, full_matrices=False), [(3, 1, 4)],
                 input_generator=_with_zero_first, **_TOL),
    ],
}


components = [
    Component("lax.linalg.eigh", onnx=_JACOBI_OPS, since="v0.8.0", testcases=[
        Testcase("eigh", _eigh, [(4, 4)], input_generator=_sym, **_TOL),
        Testcase("eigh_odd_batched", _eigh, [("B", 5, 5)], input_generator=_sym, **_TOL),
        Testcase("eigh_upper_only", _eigh_upper, [(3, 3)], **_TOL),
        Testcase("eigh_reconstruct", _eigh_reconstruct, [(2, 6, 6)], input_generator=_sym, **_TOL),
        Testcase("eigvalsh", jnp.linalg.eigvalsh, [(6, 6)], input_generator=_sym, **_TOL),
        Testcase("eigh_entries_1e30", _eigh_scaled(1e30), [(6, 6)], input_generator=_sym, **_TOL),
        Testcase("eigh_entries_1e-30", _eigh_scaled(1e-30), [(6, 6)], input_generator=_sym, **_TOL),
        Testcase("eigh_repeated_eigenvalues", lambda x: jnp.linalg.eigvalsh(jnp.eye(4, dtype=x.dtype) * 2.0 + 0 * x),
                 [(4, 4)], **_TOL),
        *_EXACT_SIGN_CASES["eigh"],
    ]),
    Component("lax.linalg.svd", onnx=_JACOBI_OPS, since="v0.8.0", testcases=[
        Testcase("svd", _svd(False), [(4, 4)], **_TOL),
        Testcase("svd_tall_batched", _svd(False), [("B", 5, 3)], **_TOL),
        Testcase("svd_wide", _svd(False), [(3, 5)], **_TOL),
        Testcase("svd_full_tall", _svd(True), [(5, 3)], **_TOL),
        Testcase("svd_full_wide", _svd(True), [(2, 4)], **_TOL),
        Testcase("svd_entries_1e30", _svd_scaled(1e30), [(5, 4)], **_TOL),
        Testcase("svd_entries_1e-30", _svd_scaled(1e-30), [(5, 4)], **_TOL),
        Testcase("svdvals", jnp.linalg.svdvals, [("B", 4, 3)], **_TOL),
        Testcase("pinv", jnp.linalg.pinv, [(4, 3)], **_TOL),
        Testcase("lstsq", lambda a, b: jnp.linalg.lstsq(a, b)[0], [(5, 3), (5, 2)], **_TOL),
        Testcase("matrix_rank", jnp.linalg.matrix_rank, [(4, 4)],
                 input_generator=lambda rng, shape, dt: rng.standard_normal((4, 2)) @ rng.standard_normal((2, 4))),
        Testcase("cond", jnp.linalg.cond, [(4, 4)], **_TOL),
        Testcase("norm_2", lambda x: jnp.linalg.norm(x, 2), [(3, 4)], **_TOL),
        *_EXACT_SIGN_CASES["svd"],
    ]),
]

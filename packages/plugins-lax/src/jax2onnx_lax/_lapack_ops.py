"""Building blocks of :mod:`.linalg_schur`'s LAPACK port, written in lax primitives so they trace to
few equations: a select with broadcasting, and rows, columns and entries at a traced index read
(one-hot MatMuls) and written (masks) without dynamic shapes, which ``jax.vmap`` batches as they
are. Reads are exact for finite entries, and an out-of-range index reads zeros."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def where(cond, x, y):
    """``jnp.where(cond, x, y)`` as one ``select_n`` equation. ``jnp.where`` is a jitted library
    function: each of the port's ~300 calls became a jit equation that the export recognizes,
    re-traces and verifies before lowering it (a third of lowering an eig); the same select without
    the jit wrapper lowers directly, to the same ONNX ``Where``."""
    dtype = jnp.result_type(x, y)
    x, y = _as_dtype(x, dtype), _as_dtype(y, dtype)
    cond = cond if hasattr(cond, "dtype") else np.asarray(cond)
    shape = jnp.broadcast_shapes(np.shape(cond), np.shape(x), np.shape(y))
    if np.ndim(cond) == 0 and isinstance(cond, jax.Array):  # select_n takes a scalar predicate as it is
        return lax.select(cond, _broadcast(x, shape), _broadcast(y, shape))
    return lax.select(_broadcast(cond, shape), _broadcast(x, shape), _broadcast(y, shape))


def _as_dtype(v, dtype):
    """``v`` (a traced or concrete array, or a Python scalar) as ``dtype``."""
    if isinstance(v, jax.Array):
        return v if v.dtype == dtype else lax.convert_element_type(v, dtype)
    return np.asarray(v, dtype)


def _broadcast(v, shape):
    if np.shape(v) == tuple(shape):
        return v
    if not isinstance(v, jax.core.Tracer):  # a constant: broadcast here, no Expand in the graph
        return np.broadcast_to(np.asarray(v), shape)
    return lax.broadcast_in_dim(v, shape, tuple(range(len(shape) - np.ndim(v), len(shape))))


def onehot(i, n, dtype):
    """``e_i`` of length ``n`` (all zeros for an out-of-range ``i``)."""
    return (np.arange(n, dtype=np.int32) == i).astype(dtype)


def pick(a, i, axis):
    """``a[i]`` along ``axis`` (0 rows, 1 columns) for a traced ``i``, as ``e_i^T a`` (``a e_i``):
    exact for finite entries, and an out-of-range ``i`` picks zeros (the bulge chase relies on that
    at the matrix edge). One MatMul, where a mask and a sum took four nodes."""
    e = onehot(i, a.shape[axis], a.dtype)
    return e @ a if axis == 0 else a @ e


def entry(a, i, j):
    return onehot(i, a.shape[0], a.dtype) @ a @ onehot(j, a.shape[1], a.dtype)


def vec_pick(v, i):
    return v @ onehot(i, v.shape[0], v.dtype)


def put(a, i, j, value, when=True):
    """``a`` with entry ``(i, j)`` replaced by ``value`` where ``when``."""
    n0, n1 = a.shape
    mask = (np.arange(n0, dtype=np.int32) == i)[:, None] & (np.arange(n1, dtype=np.int32) == j)[None, :] & when
    return where(mask, value, a)


def vec_put(v, i, value, when=True):
    return where((np.arange(v.shape[0], dtype=np.int32) == i) & when, value, v)


def swap(a, i, j):
    """Rows and columns ``i`` and ``j`` of ``a`` exchanged (a permutation similarity), as
    ``P^T a P`` with the transposition's permutation matrix: two MatMuls, exact."""
    idx = np.arange(a.shape[0], dtype=np.int32)
    target = idx + (idx == i) * (j - i) + (idx == j) * (i - j)  # column c of P is e_target[c]
    p = (idx[:, None] == target[None, :]).astype(a.dtype)
    return p.T @ a @ p


def perm_matrix(perm, dtype):
    """``P`` with ``P[perm[r], r] = 1``: ``A = P A' P^T`` undoes ``A' = P^T A P``."""
    n = perm.shape[0]
    return (np.arange(n, dtype=np.int32)[:, None] == perm[None, :]).astype(dtype)


def diag_pad(a, off):
    """``a[k, k + off]`` for k = 0..n-1, zero where ``k + off`` is out of range."""
    n = a.shape[0]
    r = np.arange(n, dtype=np.int32)
    mask = (r[None, :] - r[:, None]) == off
    return jnp.sum(where(mask, a, 0), axis=1)


def roll(v, shift):
    """``roll(v, shift)`` of a vector as a MatMul with the constant permutation matrix: one
    equation (exact for finite entries), where ``jnp.roll`` is a library call to recognise."""
    n = v.shape[0]
    if v.dtype == jnp.bool_:
        return roll(v.astype(np.float32), shift) != 0
    return v @ np.roll(np.eye(n, dtype=v.dtype), shift, axis=1)


def sign(a, b):
    """Fortran ``SIGN(a, b)``: ``|a|`` with the sign of ``b`` (``b = 0`` counts as positive)."""
    return where(b >= 0, jnp.abs(a), -jnp.abs(a))


def unit_sign(b):
    """Fortran ``SIGN(1, b)``."""
    one = np.ones((), b.dtype)
    return where(b >= 0, one, -one)


def lapy2(x, y):
    """``dlapy2``: ``sqrt(x^2 + y^2)`` without overflow."""
    xa, ya = jnp.abs(x), jnp.abs(y)
    w, z = jnp.maximum(xa, ya), jnp.minimum(xa, ya)
    safe = where(w == 0, 1, w)
    return where(z == 0, w, w * jnp.sqrt(1 + (z / safe) ** 2))

"""Calibrated int4 codes for one ``[K, N]`` weight, computed in JAX from ``H = X^T X`` of the
activations ``X`` (``[rows, K]``) the weight multiplies.

Both methods keep the exported block grid exactly: blocks of ``block_size`` along K, each with one
scale (and, asymmetric, one zero point) per output column, values ``(code - zero_point) * scale``
with codes 0..15, as onnxruntime's round-to-nearest quantizer writes them (asymmetric: the range
``min(w, 0)..max(w, 0)`` in 15 steps; symmetric: the largest-magnitude value at code 0, zero point
8). Only the codes, scales and zero points differ, so the graph is plain int4's.

- :func:`gptq_blocks`: GPTQ (Frantar et al., 2022). Columns of K are quantized in order; each
  one's rounding error is spread over the columns not yet quantized through the inverse Hessian
  (its upper Cholesky factor), so the output ``X W`` error is minimised rather than the weight
  error. ``H`` is damped by ``damp`` times its mean diagonal; columns no input reaches
  (``H[k, k] = 0``) become zero. Updates are applied a block at a time (the block is the int4
  block), and each block's scale/zero point is chosen from the weights as updated when the block
  is reached.
- :func:`awq_clip_blocks`: the part of AWQ (Lin et al., 2023) a fixed block format can hold:
  *activation-aware clipping*. AWQ's per-input-channel scaling ``W diag(s)`` needs ``1/s`` folded
  into the op before the matmul (a graph change); within one block a common ``s`` cancels
  against the block's scale, so it is not applied. For each block and column, the range is shrunk
  by the ratio in ``ratios`` that minimises ``e^T H_b e`` (``e`` the block's rounding error,
  ``H_b`` the block's diagonal part of ``H``: the error of that block's share of the output).

:func:`output_error` measures codes against held-out inputs (``H`` of rows neither method saw):
the calibration keeps a method's codes only where they beat round-to-nearest's there.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

#: AWQ's clipping grid: the range times 1.0, 0.975, ..., 0.525
CLIP_RATIOS = tuple(1.0 - 0.025 * i for i in range(20))


def _grid(w: jax.Array, symmetric: bool, ratio: jax.Array | float = 1.0) -> tuple[jax.Array, jax.Array]:
    """Scale and zero point of the blocks ``w`` ``[..., block, N]`` (reduced over ``block``), the
    range shrunk by ``ratio``."""
    if symmetric:
        idx = jnp.argmax(jnp.abs(w), axis=-2, keepdims=True)
        peak = jnp.take_along_axis(w, idx, axis=-2)[..., 0, :] * ratio
        scale = peak / -8.0
        return jnp.where(scale == 0, 1.0, scale), jnp.full(scale.shape, 8.0, w.dtype)
    lo = jnp.minimum(jnp.min(w, axis=-2), 0.0) * ratio
    hi = jnp.maximum(jnp.max(w, axis=-2), 0.0) * ratio
    scale = (hi - lo) / 15.0
    scale = jnp.where(scale == 0, 1.0, scale)
    return scale, jnp.clip(jnp.round(-lo / scale), 0, 15)


def _round(w: jax.Array, scale: jax.Array, zp: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Codes of ``w`` on the grid and the values they stand for."""
    q = jnp.clip(jnp.round(w / scale) + zp, 0, 15)
    return q, (q - zp) * scale


def _padded(w: np.ndarray, h: np.ndarray, block_size: int) -> tuple[jax.Array, jax.Array]:
    K = w.shape[0]
    pad = -K % block_size
    w = jnp.pad(jnp.asarray(w, jnp.float32), ((0, pad), (0, 0)))
    h = jnp.pad(jnp.asarray(h, jnp.float32), ((0, pad), (0, pad)))  # zero rows: no input reaches them
    return w, h


@functools.partial(jax.jit, static_argnames=("block_size", "symmetric"))
def _gptq(w: jax.Array, h: jax.Array, damp: float, block_size: int, symmetric: bool):
    K, N = w.shape
    diag = jnp.diagonal(h)
    dead = diag == 0
    h = h + jnp.diag(jnp.where(dead, 1.0, 0.0))
    w = jnp.where(dead[:, None], 0.0, w)
    h = h + jnp.eye(K, dtype=h.dtype) * (damp * jnp.mean(jnp.diagonal(h)))
    low = jnp.linalg.cholesky(h)
    h_inv = jax.scipy.linalg.cho_solve((low, True), jnp.eye(K, dtype=h.dtype))
    upper = jnp.linalg.cholesky(h_inv).T  # upper.T @ upper == H^-1
    rows = jnp.arange(block_size)
    ks = jnp.arange(K)

    def block(b, carry):
        w, codes, scales, zps = carry
        start = b * block_size
        w1 = jax.lax.dynamic_slice(w, (start, 0), (block_size, N))
        u1 = jax.lax.dynamic_slice(upper, (start, start), (block_size, block_size))
        scale, zp = _grid(w1, symmetric)

        def column(i, c):
            w1, q1, e1 = c
            x = w1[i]
            q, deq = _round(x, scale, zp)
            err = (x - deq) / u1[i, i]
            w1 = w1 - jnp.outer(jnp.where(rows >= i, u1[i], 0.0), err)  # spread over the later columns
            return w1, q1.at[i].set(q), e1.at[i].set(err)

        zero = jnp.zeros((block_size, N), w.dtype)
        _, q1, e1 = jax.lax.fori_loop(0, block_size, column, (w1, zero, zero))
        later = jnp.where(ks >= start + block_size, jax.lax.dynamic_slice(upper, (start, 0), (block_size, K)), 0.0)
        w = w - later.T @ e1  # the block's errors, spread over the blocks after it
        codes = jax.lax.dynamic_update_slice(codes, q1, (start, 0))
        return w, codes, scales.at[b].set(scale), zps.at[b].set(zp)

    blocks = K // block_size
    init = (w, jnp.zeros_like(w), jnp.zeros((blocks, N), w.dtype), jnp.zeros((blocks, N), w.dtype))
    _, codes, scales, zps = jax.lax.fori_loop(0, blocks, block, init)
    return codes, scales, zps


def gptq_blocks(w: np.ndarray, h: np.ndarray, block_size: int, symmetric: bool,
                damp: float = 0.01) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPTQ codes ``[K, N]`` (uint8 0..15), scales and zero points ``[blocks, N]`` of ``w``
    ``[K, N]`` for inputs with ``h = X^T X`` ``[K, K]``."""
    K = w.shape[0]
    wp, hp = _padded(w, h, block_size)
    codes, scales, zps = _gptq(wp, hp, damp, block_size, symmetric)
    return (np.asarray(codes[:K], dtype=np.uint8), np.asarray(scales, dtype=np.float32),
            np.asarray(zps, dtype=np.uint8))


@functools.partial(jax.jit, static_argnames=("block_size", "symmetric"))
def _awq_clip(w: jax.Array, h: jax.Array, ratios: jax.Array, block_size: int, symmetric: bool):
    K, N = w.shape
    blocks = K // block_size
    wb = w.reshape(blocks, block_size, N)
    hb = h.reshape(blocks, block_size, blocks, block_size)[jnp.arange(blocks), :, jnp.arange(blocks), :]

    def loss(ratio: jax.Array) -> jax.Array:
        scale, zp = _grid(wb, symmetric, ratio)
        _, deq = _round(wb, scale[:, None, :], zp[:, None, :])
        e = wb - deq
        return jnp.einsum("gkn,gkl,gln->gn", e, hb, e)

    def search(r, best):
        err, chosen = best
        trial = loss(ratios[r])
        better = trial < err
        return jnp.where(better, trial, err), jnp.where(better, ratios[r], chosen)

    first = loss(ratios[0])
    _, chosen = jax.lax.fori_loop(1, ratios.shape[0], search, (first, jnp.full(first.shape, ratios[0])))
    scale, zp = _grid(wb, symmetric, chosen)
    codes, _ = _round(wb, scale[:, None, :], zp[:, None, :])
    return codes.reshape(K, N), scale, zp


def awq_clip_blocks(w: np.ndarray, h: np.ndarray, block_size: int, symmetric: bool,
                    ratios: tuple[float, ...] = CLIP_RATIOS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Activation-aware clipped codes, scales and zero points (as :func:`gptq_blocks`)."""
    K = w.shape[0]
    wp, hp = _padded(w, h, block_size)
    codes, scales, zps = _awq_clip(wp, hp, jnp.asarray(ratios, jnp.float32), block_size, symmetric)
    return (np.asarray(codes[:K], dtype=np.uint8), np.asarray(scales, dtype=np.float32),
            np.asarray(zps, dtype=np.uint8))


def rtn_blocks(w: np.ndarray, block_size: int, symmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Round-to-nearest on the same grid (what a calibrated weight keeps where its method's codes
    do not beat these on the held-out rows)."""
    K, N = w.shape
    wp, _ = _padded(w, np.zeros((K, K), np.float32), block_size)
    wb = wp.reshape(-1, block_size, N)
    scale, zp = _grid(wb, symmetric)
    codes, _ = _round(wb, scale[:, None, :], zp[:, None, :])
    return (np.asarray(codes.reshape(-1, N)[:K], dtype=np.uint8), np.asarray(scale, dtype=np.float32),
            np.asarray(zp, dtype=np.uint8))


@jax.jit
def _output_error(w: jax.Array, h: jax.Array, approx: jax.Array) -> jax.Array:
    d = w - approx
    return jnp.sum(d * jnp.matmul(h, d, precision=jax.lax.Precision.HIGHEST))


def output_error(w: np.ndarray, h: np.ndarray, blocks: tuple[np.ndarray, np.ndarray, np.ndarray] | None,
                 block_size: int) -> float:
    """``||X (W - W_q)||^2`` for inputs with ``h = X^T X``, ``W_q`` the weight ``blocks`` stand
    for (``None``: zero, which gives ``||X W||^2``, the scale to read the error against)."""
    approx = np.zeros_like(w) if blocks is None else dequantized(*blocks, block_size)
    return float(_output_error(jnp.asarray(w, jnp.float32), jnp.asarray(h, jnp.float32), jnp.asarray(approx)))


def dequantized(codes: np.ndarray, scales: np.ndarray, zero_points: np.ndarray, block_size: int) -> np.ndarray:
    """The ``[K, N]`` float32 weight the blocks stand for."""
    K = codes.shape[0]
    rep = lambda a: np.repeat(np.asarray(a, np.float32), block_size, axis=0)[:K]  # noqa: E731
    return (codes.astype(np.float32) - rep(zero_points)) * rep(scales)


__all__ = ["CLIP_RATIOS", "awq_clip_blocks", "dequantized", "gptq_blocks", "output_error", "rtn_blocks"]

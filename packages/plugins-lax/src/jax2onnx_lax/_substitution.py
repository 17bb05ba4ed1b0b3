"""The blocked triangular substitution ``T X = R`` as straight-line graph: what ``triangular_solve``
(:mod:`.linalg_solve`) and the blocked LU's panel update (:mod:`.linalg_factor`) both emit for static
sizes up to ``linalg_factor.UNROLL_MAX``."""

from __future__ import annotations

import numpy as np

#: Rows per diagonal block of the blocked substitution. Each diagonal block is inverted (all blocks
#: at once, see :func:`_inverse_diagonal_blocks`); the substitution then takes one MatMul per block
#: for its rows and one for the rows below it.
TRSM_BLOCK = 8


def substitute_unrolled(ctx, t, rhs, m, lower, unit):
    """``T X = R``, straight-line (see ``UNROLL_MAX``), blocked with inverted diagonal blocks (the
    form of GPU BLAS's trsm). onnxruntime's cost here is its per-node overhead, so the sequential
    part is one step per block of :data:`TRSM_BLOCK` rows, four nodes each: ``X_i = inv(T_ii) R_i``
    and the rows below take ``T[below, i] X_i`` as one MatMul. The inverses of all diagonal blocks
    come from a handful of batched MatMuls (:func:`_inverse_diagonal_blocks`). An explicit inverse
    is only as accurate as its block's condition number allows; the blocks are small, so that is
    the condition of 8 x 8 diagonal blocks, not of T (measured: residuals within 2x of LAPACK's on
    random, ill-conditioned and graded systems, bench/linalg_accuracy.py). An upper triangle is
    solved as the lower one of the index-reversed system. Only the named triangle of ``t`` is read."""
    op = ctx.op
    if not lower:
        t = _reverse_rows_cols(ctx, t)
        rhs = _reverse_rows(ctx, rhs)
    dtype = np.dtype(ctx.avals_in[0].dtype)
    nb = min(TRSM_BLOCK, m)
    nblk = -(-m // nb)
    size = nblk * nb
    rank = len(ctx.avals_in[0].shape)
    if size != m:  # pad to whole blocks: an identity diagonal, zero right-hand sides
        pads = [0] * (2 * rank)
        pads[2 * rank - 2] = pads[2 * rank - 1] = size - m
        t = op.Pad(t, ctx.i64(pads))
        t = op.Where(ctx.const(np.diag(np.arange(size) >= m)), 1.0, t)
        rhs = op.Pad(rhs, ctx.i64(_pad_rows_bottom(rank, size - m)))
    inv = _inverse_diagonal_blocks(ctx, t, nb, nblk, rank, unit, dtype)  # [..., nb, size]: inv(T_ii) side by side
    inv_blocks = op.Split(inv, ctx.i64([nb] * nblk), axis=-1, _outputs=nblk) if nblk > 1 else [inv]
    xs, r = [], rhs
    for i, inv_i in enumerate(inv_blocks):
        if i == nblk - 1:
            xs.append(op.MatMul(inv_i, r))
            break
        r_i, r = op.Split(r, ctx.i64([nb, size - (i + 1) * nb]), axis=-2, _outputs=2)
        x_i = op.MatMul(inv_i, r_i)
        xs.append(x_i)
        below = op.Slice(t, ctx.i64([(i + 1) * nb, i * nb]), ctx.i64([size, (i + 1) * nb]), ctx.i64([-2, -1]))
        r = op.Sub(r, op.MatMul(below, x_i))
    x = op.Concat(*xs, axis=-2) if len(xs) > 1 else xs[0]
    if size != m:
        x = op.Slice(x, ctx.i64([0]), ctx.i64([m]), ctx.i64([-2]))
    return x if lower else _reverse_rows(ctx, x)


def _inverse_diagonal_blocks(ctx, t, nb, nblk, rank, unit, dtype):
    """The inverses of the ``nb x nb`` lower-triangular diagonal blocks of ``t`` [..., nb*nblk, nb*nblk]
    as ``[..., nb, nblk * nb]`` (block i in columns ``i*nb:(i+1)*nb``). All blocks at once, by
    recursive doubling: with ``X`` the inverse of the block diagonal of width ``s`` and ``B`` the
    lower-left ``s x s`` blocks inside the blocks of width ``2s``, ``inv([[A, 0], [B, C]]) =
    [[A^-1, 0], [-C^-1 B A^-1, C^-1]]`` is ``X - X B X`` (LAPACK trtri's recursion, every level a
    batched MatMul). Only the strict lower triangle and (unless ``unit``) the diagonal are read."""
    op = ctx.op
    size = nb * nblk
    batch0 = [0] * (rank - 2)
    if nblk > 1:  # [..., size, size] -> [..., nblk, nb, nblk, nb] -> diagonal blocks [..., nblk, nb, nb]
        blocks = op.Reshape(t, ctx.i64(batch0 + [nblk, nb, nblk, nb]))
        blocks = op.Transpose(blocks, perm=[*range(rank - 2), rank - 2, rank, rank - 1, rank + 1])
        blocks = op.Reshape(blocks, ctx.i64(batch0 + [nblk * nblk, nb, nb]))
        blocks = op.Gather(blocks, ctx.const(np.arange(nblk, dtype=np.int64) * (nblk + 1)), axis=rank - 2)
    else:
        blocks = t
    i, j = np.arange(nb).reshape(nb, 1), np.arange(nb).reshape(1, nb)
    x = None  # None: the identity (unit diagonal, width 1)
    if not unit:
        x = op.Where(ctx.const(np.eye(nb, dtype=bool)), op.Reciprocal(blocks), 0.0)
    s = 1
    while s < nb:
        lower_left = (i // (2 * s) == j // (2 * s)) & (i // s != j // s) & (i > j)
        b = op.Where(ctx.const(lower_left), blocks, 0.0)
        if x is None:
            x = op.Sub(ctx.const(np.eye(nb, dtype=dtype)), b)
        else:
            x = op.Sub(x, op.MatMul(op.MatMul(x, b), x))
        s *= 2
    if x is None:  # a 1 x 1 unit block
        x = ctx.const(np.eye(nb, dtype=dtype))
        return x if nblk == 1 else ctx.const(np.tile(np.eye(nb, dtype=dtype), (1, nblk)))
    if nblk == 1:
        return x
    # [..., nblk, nb, nb] -> [..., nb, nblk, nb] -> [..., nb, nblk * nb]
    x = op.Transpose(x, perm=[*range(rank - 2), rank - 1, rank - 2, rank])
    return op.Reshape(x, ctx.i64(batch0 + [nb, size]))


def _pad_rows_bottom(rank, rows):
    pads = [0] * (2 * rank)
    pads[2 * rank - 2] = rows
    return pads


def _reverse_rows(ctx, x):
    return ctx.op.Slice(x, ctx.i64([-1]), ctx.i64([np.iinfo(np.int64).min]), ctx.i64([-2]), ctx.i64([-1]))


def _reverse_rows_cols(ctx, x):
    big = np.iinfo(np.int64).min
    return ctx.op.Slice(x, ctx.i64([-1, -1]), ctx.i64([big, big]), ctx.i64([-2, -1]), ctx.i64([-1, -1]))

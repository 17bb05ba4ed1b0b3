"""lax.linalg factorisations: ``lu``, ``lu_pivots_to_permutation``, ``cholesky``, ``qr``, ``geqrf``,
``householder_product``, ``hessenberg``, ``tridiagonal``, each one ONNX ``Loop`` over the columns (see :mod:`._matrix` for how a
step touches row/column k of every batch element at once); ``lu``, ``cholesky``, ``geqrf`` and
``householder_product`` (so ``qr``) of up to ``UNROLL_MAX`` steps are unrolled into straight-line graph instead (static slices of the shrinking
trailing block; onnxruntime runs a Loop body's nodes at several times a straight graph's cost).

- ``lu``: partial pivoting as LAPACK's getrf does it: the pivot is the first row of largest
  ``|a|`` at or below the diagonal, rows are swapped, the column below is scaled by the pivot's
  reciprocal (a zero pivot leaves the column unscaled and unswapped, as getrf does), and the trailing
  block takes the rank-1 update. Outputs ``(lu, pivots, permutation)`` as JAX returns them (int32).
  Unrolled, more than ``LU_PANEL`` steps are blocked: panels of columns, one MatMul update per panel.
- ``cholesky``: blocked right-looking (column steps within a panel, one MatMul per panel) when unrolled, the
  left-looking column algorithm in the Loop form; lower factor with zeros above the diagonal.
  A matrix that is not positive definite gives an all-NaN factor, as JAX's does.
- ``geqrf``/``qr``/``householder_product``: Householder reflections with LAPACK's conventions
  (dlarfg: ``beta = -sign(alpha) * norm``, ``tau = (beta - alpha) / beta``, ``v[0] = 1``; no
  reflection when the column below the diagonal is zero), so Q and R match LAPACK's signs, not
  only up to sign. ``qr`` forms Q by applying the reflections to the identity, last one first.
- ``hessenberg`` (gehrd) and ``tridiagonal`` (sytrd): the same reflectors applied from both sides,
  column k's reflector annihilating below the subdiagonal; outputs packed as LAPACK packs them
  (the reduced matrix, reflectors below the subdiagonal, taus; sytrd leaves the triangle it does not
  read as it was). ``tridiagonal(lower=False)`` is the lower reduction of the index-reversed matrix,
  which is exactly the order and the reflectors sytrd's upper variant uses.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from jax2onnx import compat
from jax2onnx.plugin import Lowerings

from . import _matrix as mx
from . import linalg_cholesky_inverse
from ._substitution import substitute_unrolled

lowerings = Lowerings()


# ---------------------------------------------------------------------------------------------
# LU


#: Static step counts up to this are unrolled into straight-line graph instead of one ``Loop``.
#: onnxruntime spends ~1 us per node per Loop iteration on top of the kernels, against ~0.2-0.5 us
#: for a node of a straight graph, and unrolled steps slice shrinking blocks with static bounds.
#: Measured (float32, one thread, loop -> unrolled): LU 64: 1.9 -> 1.2 ms, 128: 9.4 -> 5.9 ms,
#: 256: 60 -> 31 ms; cholesky 256: 24 -> 6.4 ms; qr 256: 65 -> 21 ms. At 256 a solve is ~8k nodes,
#: 1.3 MB; above that the graph keeps growing with n while the Loop's overhead share shrinks.
UNROLL_MAX = 256


@lowerings.register("lu")
def lower_lu(ctx, a):
    """getrf's partial pivoting over the columns, unrolled up to :data:`UNROLL_MAX` steps, else one
    Loop. The permutation rides along as an extra column of the matrix (row swaps move it; the
    elimination skips it)."""
    mx.require_real(ctx)
    a_aval = ctx.avals_in[0]
    m, n = mx.static_matrix_dims(ctx, a_aval, "the matrix")
    k_steps = min(m, n)
    batch = mx.batch_shape(a_aval)
    dtype = np.dtype(a_aval.dtype)
    rank = len(a_aval.shape)
    op = ctx.op
    perm0 = mx.expand_to(ctx, ctx.const(np.arange(m, dtype=dtype).reshape(m, 1)), [*batch, m, 1])
    if k_steps == 0:
        piv = mx.expand_to(ctx, ctx.const(np.zeros(0, dtype=np.int32)), [*batch, 0])
        return [op.Identity(a), piv, ctx.cast(op.Squeeze(perm0, ctx.i64([-1])), np.int32)]
    aug = op.Concat(a, perm0, axis=-1)  # [..., m, n + 1]
    if LU_PANEL < k_steps <= UNROLL_MAX:
        lu, piv = _lu_blocked(ctx, aug, m, n, batch)
    elif k_steps <= UNROLL_MAX:
        lu, piv = _lu_unrolled(ctx, aug, m, n, batch)
    else:
        lu, piv = _lu_loop(ctx, aug, m, n, batch, dtype, rank)
    lu_out = op.Slice(lu, ctx.i64([0]), ctx.i64([n]), ctx.i64([-1]))
    perm = ctx.cast(op.Squeeze(op.Slice(lu, ctx.i64([n]), ctx.i64([n + 1]), ctx.i64([-1])), ctx.i64([-1])),
                    np.int32)
    return [lu_out, piv, perm]


def _lu_unrolled(ctx, aug, m, n, batch):
    """Step k works on the rows not yet pivoted (``s``, ``[..., m - k, w]``, static bounds; columns
    ``[L so far | column k | the trailing columns | one extra column riding along]``, the extra one
    (the permutation or a panel's row order) moved by the swaps but never updated). onnxruntime's
    cost here is its per-node overhead, so a step is sixteen nodes (eighteen before, with masks over
    the whole width): one Split of ``s`` and of each row gathered, the pivot row by one GatherND (it
    leaves ``s`` for good: row k of the result) and the swap with dropping the first row by another
    (row 0 takes the pivot's place), the multipliers, the rank-1 update of the trailing columns and
    one Concat. The multipliers are the column times the pivot's reciprocal, as getrf scales (a
    Div, one node less, measured det's error against a float64 determinant at 256 up 1.6x).
    Rows finished are concatenated once at the end."""
    op = ctx.op
    k_steps = min(m, n)
    nb = len(batch)
    s, rows_out, pivs = aug, [], []
    for k in range(k_steps):
        r = m - k
        sizes = [k, 1, n - k - 1, 1]
        keep = [i for i, size in enumerate(sizes) if size]  # ONNX Split has no empty outputs
        part = _split_columns(ctx, s, sizes, keep)
        # getrf's pivot: the first row of largest |a|
        p = op.ArgMax(op.Abs(part[1]), axis=-2, keepdims=1, select_last_index=0)  # [..., 1, 1]
        pivs.append(p)
        if r == 1:  # the last row of a wide or square matrix: nothing below to eliminate
            rows_out.append(s)
            s = None
            break
        row_p = op.GatherND(s, p, batch_dims=nb)  # [..., 1, w]: p [..., 1, 1] indexes the rows
        rows_out.append(row_p)
        below = np.arange(1, r, dtype=np.int64).reshape(r - 1, 1)
        # rows 1.. of s with row p replaced by row 0: getrf's swap, the pivot row dropped
        order = op.Where(op.Equal(ctx.const(below), p), ctx.const(np.zeros((), np.int64)), ctx.const(below))
        swapped = _split_columns(ctx, op.GatherND(s, order, batch_dims=nb), sizes, keep)
        pivot_row = _split_columns(ctx, row_p, sizes, keep)
        pivot = pivot_row[1]
        # a zero column (pivot 0, so all of it is 0): getrf neither scales nor eliminates
        mult = op.Mul(swapped[1], op.Reciprocal(op.Where(op.Equal(pivot, 0.0), 1.0, pivot)))  # [..., r - 1, 1]
        swapped[1] = mult
        if 2 in swapped:
            swapped[2] = op.Sub(swapped[2], op.Mul(mult, pivot_row[2]))
        s = op.Concat(*(swapped[i] for i in keep), axis=-1)
    if s is not None:  # a tall matrix: the rows below the last pivot
        rows_out.append(s)
    lu = op.Concat(*rows_out, axis=-2) if len(rows_out) > 1 else rows_out[0]
    # pivots are relative to the rows left at step k: add k
    piv = op.Concat(*pivs, axis=-1) if len(pivs) > 1 else pivs[0]  # [..., 1, K]
    piv = op.Add(op.Squeeze(piv, ctx.i64([-2])), ctx.const(np.arange(k_steps, dtype=np.int64)))
    return lu, ctx.cast(piv, np.int32)


def _split_columns(ctx, x, sizes, keep):
    """``{part index: column block}`` of ``x`` split by ``sizes`` (the non-empty ``keep`` ones)."""
    if len(keep) == 1:
        return {keep[0]: x}
    outs = ctx.op.Split(x, ctx.i64([sizes[i] for i in keep]), axis=-1, _outputs=len(keep))
    return dict(zip(keep, outs, strict=True))


#: Panel width of the blocked LU (used when there are more pivot steps than this).
LU_PANEL = 32


def _lu_blocked(ctx, aug, m, n, batch):
    """getrf's blocked form, straight-line: each panel of :data:`LU_PANEL` columns (all rows not yet
    pivoted) is factorised by :func:`_lu_unrolled` with a row-index column riding along its swaps;
    that column then reorders the panel's rows of the whole matrix in one GatherND (the swaps reach
    the finished L columns on the left and the columns on the right, as getrf's laswp does), the
    panel's U12 is a unit-lower triangular solve and the rows below take ``L21 U12`` as one MatMul.
    A column step thus touches ``rows x panel`` values instead of the whole trailing matrix."""
    op = ctx.op
    k_steps = min(m, n)
    dtype = np.dtype(ctx.avals_in[0].dtype)
    block, done, pivs = aug, [], []  # block: the rows not pivoted yet, [..., r, n + 1]
    for start in range(0, k_steps, LU_PANEL):
        r, b = m - start, min(LU_PANEL, k_steps - start)
        panel = op.Slice(block, ctx.i64([start]), ctx.i64([start + b]), ctx.i64([-1]))  # [..., r, b]
        order0 = mx.expand_to(ctx, ctx.const(np.arange(r, dtype=dtype).reshape(r, 1)), [*batch, r, 1])
        lu_p, piv_p = _lu_unrolled(ctx, op.Concat(panel, order0, axis=-1), r, b, batch)
        pivs.append(op.Add(piv_p, ctx.const(np.asarray(start, np.int32))) if start else piv_p)
        order = ctx.cast(op.Slice(lu_p, ctx.i64([b]), ctx.i64([b + 1]), ctx.i64([-1])), np.int64)  # [..., r, 1]
        rows = op.GatherND(block, order, batch_dims=len(batch))  # the panel's swaps, whole rows
        parts = [op.Slice(rows, ctx.i64([0]), ctx.i64([start]), ctx.i64([-1]))] if start else []
        parts.append(op.Slice(lu_p, ctx.i64([0]), ctx.i64([b]), ctx.i64([-1])))  # L11\U11 over L21
        if start + b < n:  # U12 = L11^-1 A12; A22 -= L21 U12
            a12_22 = op.Slice(rows, ctx.i64([start + b]), ctx.i64([n]), ctx.i64([-1]))
            top = a12_22 if r == b else op.Slice(a12_22, ctx.i64([0]), ctx.i64([b]), ctx.i64([-2]))
            l11 = op.Slice(lu_p, ctx.i64([0, 0]), ctx.i64([b, b]), ctx.i64([-2, -1]))
            u12 = substitute_unrolled(ctx, l11, top, b, lower=True, unit=True)
            if r > b:
                l21 = op.Slice(lu_p, ctx.i64([b, 0]), ctx.i64([r, b]), ctx.i64([-2, -1]))
                a22 = op.Slice(a12_22, ctx.i64([b]), ctx.i64([r]), ctx.i64([-2]))
                parts.append(op.Concat(u12, op.Sub(a22, op.MatMul(l21, u12)), axis=-2))
            else:
                parts.append(u12)
        parts.append(op.Slice(rows, ctx.i64([n]), ctx.i64([n + 1]), ctx.i64([-1])))  # the permutation column
        new = op.Concat(*parts, axis=-1)  # [..., r, n + 1]
        if r == b:
            done.append(new)
            block = None
            break
        done.append(op.Slice(new, ctx.i64([0]), ctx.i64([b]), ctx.i64([-2])))
        block = op.Slice(new, ctx.i64([b]), ctx.i64([r]), ctx.i64([-2]))
    if block is not None:  # a tall matrix: the rows below the last pivot
        done.append(block)
    lu = op.Concat(*done, axis=-2) if len(done) > 1 else done[0]
    return lu, op.Concat(*pivs, axis=-1)


def _lu_loop(ctx, aug, m, n, batch, dtype, rank):
    """One Loop over the pivot columns. The body is kept short (each node of a Loop body costs about
    a microsecond per iteration in onnxruntime): the masks of step k come from constant stacks
    indexed by k and the pivots leave as the Loop's scan output."""
    op = ctx.op
    k_steps = min(m, n)
    ks = np.arange(k_steps).reshape(k_steps, 1, 1)
    rows, cols = np.arange(m).reshape(1, m, 1), np.arange(n + 1).reshape(1, 1, n + 1)
    row_lt = ctx.const(rows[:, :, 0] < ks[:, :, 0])  # [K, m]
    row_k = ctx.const(rows == ks)  # [K, m, 1]
    update = ctx.const((rows > ks) & (cols > ks) & (cols < n))  # [K, m, n+1]: trailing block, not perm
    below = ctx.const((rows > ks) & (cols == ks))  # [K, m, n+1]: where the multipliers go
    iota_m = ctx.const(np.arange(m, dtype=np.int64))
    aug_aval = mx.aval([*batch, m, n + 1], dtype)
    piv_aval = mx.aval([*batch, 1], np.int32)

    def step(sub, k, lu):
        o = sub.op
        k1 = mx.index1(sub, k)
        rl, rk = o.Gather(row_lt, k, axis=0), o.Gather(row_k, k, axis=0)
        col = o.Gather(lu, k, axis=-1)  # [..., m]
        # getrf's pivot: first row of largest |a| among rows >= k (rows above cannot win)
        p = o.ArgMax(o.Where(rl, -1.0, o.Abs(col)), axis=-1, keepdims=1, select_last_index=0)  # [..., 1]
        is_p = o.Unsqueeze(o.Equal(iota_m, p), sub.i64([-1]))  # [..., m, 1]
        row_p = o.Unsqueeze(o.GatherND(lu, p, batch_dims=rank - 2), sub.i64([-2]))  # [..., 1, n+1]
        row_kk = mx.take(sub, lu, k1, -2)
        lu = o.Where(rk, row_p, o.Where(is_p, row_kk, lu))
        pivot = mx.take(sub, row_p, k1, -1)  # [..., 1, 1]
        zero = o.Equal(pivot, 0.0)  # a zero column: getrf neither scales nor eliminates
        mult = o.Mul(mx.take(sub, lu, k1, -1), o.Reciprocal(o.Where(zero, 1.0, pivot)))  # [..., m, 1]
        lu = o.Where(o.Gather(update, k, axis=0), o.Sub(lu, o.Mul(mult, row_p)),
                     o.Where(o.Gather(below, k, axis=0), mult, lu))
        return [lu, o.Cast(p, to=int(ir.DataType.INT32))]

    lu, pivs = mx.loop(ctx, k_steps, [(aug, aug_aval)], step, "lu_step", scans=[piv_aval])
    # pivots: [K, ..., 1] -> [..., K]
    return lu, op.Transpose(op.Squeeze(pivs, ctx.i64([-1])), perm=[*range(1, rank - 1), 0])


@lowerings.register("lu_pivots_to_permutation")
def lower_lu_pivots_to_permutation(ctx, pivots):
    """Apply the row swaps ``k <-> pivots[k]`` in order to ``arange(permutation_size)``."""
    size = int(ctx.params["permutation_size"])
    p_aval = ctx.avals_in[0]
    k_steps = p_aval.shape[-1]
    if compat.is_symbolic_dim(k_steps):
        raise NotImplementedError("lu_pivots_to_permutation: the number of pivots must be static")
    batch = tuple(p_aval.shape[:-1])
    out_dtype = np.dtype(ctx.avals_out[0].dtype)
    perm0 = mx.expand_to(ctx, ctx.const(np.arange(size, dtype=out_dtype)), [*batch, size])
    piv = ctx.cast(pivots, out_dtype)
    if k_steps == 0:
        return ctx.op.Identity(perm0)

    def step(sub, k, perm):
        op = sub.op
        rows = mx.iota(sub, size)
        p = op.Cast(mx.pick(sub, piv, op.Equal(mx.iota(sub, int(k_steps)), k), -1), to=7)  # [..., 1]
        is_p, is_k = op.Equal(rows, p), op.Equal(rows, k)
        perm_p, perm_k = mx.pick(sub, perm, is_p, -1), mx.pick(sub, perm, is_k, -1)
        return [op.Where(is_k, perm_p, op.Where(is_p, perm_k, perm))]

    (perm,) = mx.loop(ctx, int(k_steps), [(perm0, mx.aval([*batch, size], out_dtype))], step, "lu_perm_step")
    return perm


# ---------------------------------------------------------------------------------------------
# Cholesky


#: Panel width of the blocked Cholesky: the columns of a panel are eliminated one by one (within the
#: panel only), the trailing block then takes the panel's whole update as one MatMul.
CHOLESKY_PANEL = 32


@lowerings.register("cholesky")
def lower_cholesky(ctx, a):
    """Lower factor with zeros above the diagonal. potrf stops at a pivot that is not positive (or
    NaN); JAX then returns NaN everywhere, and so does this."""
    mx.require_real(ctx)
    a_aval = ctx.avals_in[0]
    n, _ = mx.static_matrix_dims(ctx, a_aval, "the matrix")
    rank = len(a_aval.shape)
    if n > 0 and linalg_cholesky_inverse.applies(ctx):  # target="onnxruntime": O(log n) levels
        return linalg_cholesky_inverse.cholesky_by_halving(ctx, a, n, rank)
    if 0 < n <= UNROLL_MAX:
        return _cholesky_blocked(ctx, a, n, rank)
    l_ = _cholesky_loop(ctx, a, a_aval, n, rank)
    # one failed pivot makes the whole factor NaN (JAX's convention)
    diag = ctx.op.ReduceSum(ctx.op.Where(ctx.const(np.eye(n, dtype=bool)), l_, 0.0), ctx.i64([-2, -1]), keepdims=1)
    return ctx.op.Where(ctx.op.IsNaN(diag), np.nan, l_)


def _cholesky_blocked(ctx, a, n, rank):
    """Right-looking blocked Cholesky, straight-line (see ``UNROLL_MAX``). The cost in onnxruntime is
    its per-node overhead, so a column step is kept to six nodes: the panel (the trailing block's
    next ``CHOLESKY_PANEL`` columns, all its rows) is eliminated in LDL^T form, ``P[:, 1:] -= c
    (P[j, 1:] / d)`` with ``c`` the panel's first column and ``d = c[j]`` the pivot, reading the
    pivot row from the mirrored upper triangle (so no transpose); the rows above the diagonal are
    left as they fall and masked once per panel, and the square roots are taken once per panel
    (``L = C / sqrt(d)``). The trailing block then takes ``L21 L21^T`` as one MatMul, so a column
    step touches only ``rows x panel`` values, not the whole trailing block. A pivot that is not
    positive (or NaN) turns the result NaN at the end, as JAX does."""
    op = ctx.op
    tril = np.tril(np.ones((n, n), dtype=bool))
    s = op.Where(ctx.const(tril), a, mx.swap_last_axes(ctx, a, rank))  # potrf reads the lower triangle
    blocks, pivots = [], []
    for start in range(0, n, CHOLESKY_PANEL):
        r = n - start  # the trailing block s is r x r
        b = min(CHOLESKY_PANEL, r)
        p = s if b == r else op.Slice(s, ctx.i64([0]), ctx.i64([b]), ctx.i64([-1]))  # [..., r, b]
        cols = []
        for j in range(b):
            if j == b - 1:
                cols.append(p)
                break
            c, rest = op.Split(p, ctx.i64([1, b - j - 1]), axis=-1, _outputs=2)
            cols.append(c)
            d = op.Slice(c, ctx.i64([j]), ctx.i64([j + 1]), ctx.i64([-2]))  # [..., 1, 1]
            row = op.Slice(rest, ctx.i64([j]), ctx.i64([j + 1]), ctx.i64([-2]))  # [..., 1, b - j - 1]
            p = op.Sub(rest, op.Mul(c, op.Div(row, d)))
        cp = op.Concat(*cols, axis=-1) if b > 1 else cols[0]  # [..., r, b]: column j valid from row j
        d_row = op.ReduceSum(op.Where(ctx.const(np.eye(r, b, dtype=bool)), cp, 0.0), ctx.i64([-2]), keepdims=1)
        pivots.append(d_row)
        lp = op.Where(ctx.const(np.tril(np.ones((r, b), dtype=bool))), op.Div(cp, op.Sqrt(d_row)), 0.0)
        blocks.append(op.Pad(lp, ctx.i64(_pad_top(rank, start))) if start else lp)
        if b < r:
            l21 = op.Slice(lp, ctx.i64([b]), ctx.i64([r]), ctx.i64([-2]))  # [..., r - b, b]
            s22 = op.Slice(s, ctx.i64([b, b]), ctx.i64([r, r]), ctx.i64([-2, -1]))
            s = op.Sub(s22, op.MatMul(l21, mx.swap_last_axes(ctx, l21, rank)))
    l_ = op.Concat(*blocks, axis=-1) if len(blocks) > 1 else blocks[0]
    d_all = op.Concat(*pivots, axis=-1) if len(pivots) > 1 else pivots[0]  # [..., 1, n]
    # 0 where every pivot is positive, NaN otherwise (Greater is False for NaN); adding 0 is exact
    dtype = np.dtype(ctx.avals_in[0].dtype)
    nan_or_zero = op.Where(op.Greater(d_all, 0.0), ctx.const(np.zeros((), dtype)), ctx.const(np.full((), np.nan, dtype)))
    failed = op.ReduceSum(nan_or_zero, ctx.i64([-1]), keepdims=1)
    return op.Add(l_, failed)


def _pad_top(rank, rows):
    """``Pad`` widths adding ``rows`` zero rows above a ``[..., r, c]`` operand."""
    pads = [0] * (2 * rank)
    pads[rank - 2] = rows
    return pads


def _cholesky_loop(ctx, a, a_aval, n, rank):
    zeros = ctx.op.Where(  # zeros shaped like a (a * 0 would carry a's NaN/inf)
        ctx.const(np.zeros((1,) * rank, dtype=bool)), a, 0.0)

    def step(sub, j, l_):
        op = sub.op
        rows_c, cols = mx.iota(sub, n, [n, 1]), mx.iota(sub, n)
        col_j = op.Equal(cols, j)
        j1 = mx.index1(sub, j)
        row_j = mx.take(sub, l_, j1, -2)  # [..., 1, n]: L[j, :] (zeros from col j on)
        a_col = mx.take(sub, a, j1, -1)  # [..., n, 1]
        v = op.Sub(a_col, op.MatMul(l_, mx.swap_last_axes(sub, row_j, rank)))
        d = mx.take(sub, v, j1, -2)  # [..., 1, 1]
        ok = op.Greater(d, 0.0)  # False for NaN too
        root = op.Where(ok, op.Sqrt(op.Where(ok, d, 1.0)), np.nan)
        new_col = op.Where(op.Equal(rows_c, j), root, op.Where(op.Greater(rows_c, j), op.Div(v, root), 0.0))
        return [op.Where(col_j, new_col, l_)]

    (l_,) = mx.loop(ctx, n, [(zeros, a_aval)], step, "cholesky_step")
    return l_


# ---------------------------------------------------------------------------------------------
# Householder QR


def _geqrf(ctx, a, a_aval):
    """``(R with the reflectors below the diagonal, taus)`` as LAPACK's geqrf returns them."""
    m, n = mx.static_matrix_dims(ctx, a_aval, "the matrix")
    k_steps = min(m, n)
    batch = mx.batch_shape(a_aval)
    dtype = np.dtype(a_aval.dtype)
    taus0 = mx.expand_to(ctx, ctx.const(np.zeros(k_steps, dtype=dtype)), [*batch, k_steps])
    if k_steps == 0:
        return ctx.op.Identity(a), taus0
    if k_steps <= UNROLL_MAX:
        return _geqrf_unrolled(ctx, a, m, n, len(a_aval.shape))

    def step(sub, k, r, taus):
        op = sub.op
        rows_c, cols = mx.iota(sub, m, [m, 1]), mx.iota(sub, n)
        col_k = op.Equal(cols, k)
        k1 = mx.index1(sub, k)
        x = mx.take(sub, r, k1, -1)  # [..., m, 1]
        at_k, below = op.Equal(rows_c, k), op.Greater(rows_c, k)
        alpha = mx.take(sub, x, k1, -2)  # [..., 1, 1]
        tail = op.Where(below, x, 0.0)
        xnorm2 = op.ReduceSum(op.Mul(tail, tail), sub.i64([-2]), keepdims=1)
        no_reflection = op.Equal(xnorm2, 0.0)
        # beta = -sign(alpha) * hypot(alpha, ||x_tail||), sign(0) = +1 as dlarfg's SIGN
        norm = op.Sqrt(op.Add(op.Mul(alpha, alpha), xnorm2))
        beta = op.Where(op.Less(alpha, 0.0), norm, op.Neg(norm))
        safe_beta = op.Where(no_reflection, 1.0, beta)
        tau = op.Where(no_reflection, 0.0, op.Div(op.Sub(beta, alpha), safe_beta))
        scale = op.Where(no_reflection, 1.0, op.Sub(alpha, beta))
        v = op.Where(at_k, 1.0, op.Div(tail, scale))  # [..., m, 1], zero above k
        # apply H = I - tau v v^T to the columns right of k
        w = op.MatMul(mx.swap_last_axes(sub, v, len(a_aval.shape)), r)  # [..., 1, n]
        applied = op.Sub(r, op.Mul(op.Mul(tau, v), w))
        new_r = op.Where(op.Greater(cols, k), applied, r)
        diag = op.Where(no_reflection, alpha, beta)
        new_col = op.Where(at_k, diag, op.Where(below, v, x))
        new_r = op.Where(col_k, new_col, new_r)
        taus = op.Where(op.Equal(mx.iota(sub, k_steps), k), op.Squeeze(tau, sub.i64([-1])), taus)
        return [new_r, taus]

    r, taus = mx.loop(ctx, k_steps, [(a, a_aval), (taus0, mx.aval([*batch, k_steps], dtype))], step, "geqrf_step")
    return r, taus


def _householder_product(ctx, a, taus, a_aval, n_cols):
    """The first ``n_cols`` columns of ``H_0 H_1 ... H_{k-1}`` (orgqr), the reflectors stored below
    the diagonal of ``a`` [..., m, >=k] and their ``taus`` [..., k]."""
    m = int(a_aval.shape[-2])
    k_steps = int(ctx.avals_in[1].shape[-1]) if len(ctx.avals_in) > 1 and ctx.primitive == "householder_product" \
        else min(m, int(a_aval.shape[-1]))
    batch = mx.batch_shape(a_aval)
    dtype = np.dtype(a_aval.dtype)
    rank = len(a_aval.shape)
    q0 = mx.expand_to(ctx, ctx.const(mx.eye(m, n_cols, dtype)), [*batch, m, n_cols])
    q_aval = mx.aval([*batch, m, n_cols], dtype)
    if k_steps == 0:
        return ctx.op.Identity(q0)
    if k_steps <= UNROLL_MAX:
        return _householder_product_unrolled(ctx, a, taus, m, n_cols, k_steps, rank, dtype)

    def step(sub, it, q):
        op = sub.op
        k = op.Sub(sub.i64(k_steps - 1), it)  # last reflector first
        rows_c = mx.iota(sub, m, [m, 1])
        k1 = mx.index1(sub, k)
        x = mx.take(sub, a, k1, -1)  # [..., m, 1]
        v = op.Where(op.Equal(rows_c, k), 1.0, op.Where(op.Greater(rows_c, k), x, 0.0))
        tau = op.Unsqueeze(mx.take(sub, taus, k1, -1), sub.i64([-1]))
        w = op.MatMul(mx.swap_last_axes(sub, v, rank), q)
        return [op.Sub(q, op.Mul(op.Mul(tau, v), w))]

    (q,) = mx.loop(ctx, k_steps, [(q0, q_aval)], step, "orgqr_step")
    return q


def _geqrf_unrolled(ctx, a, m, n, rank):
    """geqrf straight-line (see ``UNROLL_MAX``): step k reflects the trailing block ``s`` (rows and
    columns from k, static slices), emits row k of R and the reflector below the diagonal, and
    keeps ``s[1:, 1:]``. The packed result is assembled once at the end."""
    op = ctx.op
    k_steps = min(m, n)
    s, u_rows, v_cols, taus = a, [], [], []
    for k in range(k_steps):
        r, c = m - k, n - k
        alpha = op.Slice(s, ctx.i64([0, 0]), ctx.i64([1, 1]), ctx.i64([-2, -1]))  # [..., 1, 1]
        if r == 1:  # nothing below the diagonal: dlarfg's tau = 0, the row stays
            taus.append(op.Where(ctx.const(np.zeros((1,) * rank, dtype=bool)), alpha, 0.0))
            u_rows.append(op.Pad(s, ctx.i64(_pad_left(rank, k))))
            break
        tail = op.Slice(s, ctx.i64([1, 0]), ctx.i64([r, 1]), ctx.i64([-2, -1]))  # [..., r-1, 1]
        xnorm2 = op.ReduceSum(op.Mul(tail, tail), ctx.i64([-2]), keepdims=1)
        none = op.Equal(xnorm2, 0.0)  # no reflection
        # beta = -sign(alpha) * hypot(alpha, ||x_tail||), sign(0) = +1 as dlarfg's SIGN
        norm = op.Sqrt(op.Add(op.Mul(alpha, alpha), xnorm2))
        beta = op.Where(op.Less(alpha, 0.0), norm, op.Neg(norm))
        tau = op.Where(none, 0.0, op.Div(op.Sub(beta, alpha), op.Where(none, 1.0, beta)))
        v = op.Div(tail, op.Where(none, 1.0, op.Sub(alpha, beta)))  # below v[0] = 1
        diag = op.Where(none, alpha, beta)
        row = diag
        if c > 1:  # H = I - tau v v^T applied to the columns right of k
            top = op.Slice(s, ctx.i64([0, 1]), ctx.i64([1, c]), ctx.i64([-2, -1]))  # [..., 1, c-1]
            rest = op.Slice(s, ctx.i64([1, 1]), ctx.i64([r, c]), ctx.i64([-2, -1]))  # [..., r-1, c-1]
            w = op.Add(top, op.MatMul(mx.swap_last_axes(ctx, v, rank), rest))  # v^T s[:, 1:]
            row = op.Concat(diag, op.Sub(top, op.Mul(tau, w)), axis=-1)
            s = op.Sub(rest, op.Mul(op.Mul(tau, v), w))
        u_rows.append(op.Pad(row, ctx.i64(_pad_left(rank, k))) if k else row)
        v_cols.append(op.Pad(v, ctx.i64(_pad_top(rank, k + 1))))
        taus.append(tau)
    upper = op.Concat(*u_rows, axis=-2) if len(u_rows) > 1 else u_rows[0]  # [..., K, n]
    if m > k_steps:
        upper = op.Pad(upper, ctx.i64(_pad_bottom(rank, m - k_steps)))
    if v_cols:
        lower = op.Concat(*v_cols, axis=-1) if len(v_cols) > 1 else v_cols[0]  # [..., m, K']
        if n > len(v_cols):
            lower = op.Pad(lower, ctx.i64(_pad_right(rank, n - len(v_cols))))
        upper = op.Add(upper, lower)  # disjoint supports: exact
    tau = op.Concat(*taus, axis=-1) if len(taus) > 1 else taus[0]  # [..., 1, K]
    return upper, op.Squeeze(tau, ctx.i64([-2]))


def _householder_product_unrolled(ctx, a, taus, m, n_cols, k_steps, rank, dtype):
    """orgqr straight-line, last reflector first. Applying ``H_k`` touches rows k.. only, and row k
    is still the identity's there, so the state is the block of rows below k (``w``, growing by one
    row a step) and row k enters as a constant."""
    op = ctx.op
    eye = mx.eye(m, n_cols, dtype)
    block = ctx.const(eye[k_steps:])  # rows k_steps.. of Q: untouched identity rows so far
    for k in range(k_steps - 1, -1, -1):
        e_k = ctx.const(eye[k : k + 1])  # [1, n_cols]
        tau = op.Unsqueeze(op.Slice(taus, ctx.i64([k]), ctx.i64([k + 1]), ctx.i64([-1])), ctx.i64([-1]))
        if k + 1 < m:
            v = op.Slice(a, ctx.i64([k + 1, k]), ctx.i64([m, k + 1]), ctx.i64([-2, -1]))  # [..., m-k-1, 1]
            w = op.Add(e_k, op.MatMul(mx.swap_last_axes(ctx, v, rank), block))  # v^T Q[k:]
            block = op.Concat(op.Sub(e_k, op.Mul(tau, w)), op.Sub(block, op.Mul(op.Mul(tau, v), w)), axis=-2)
        else:
            block = op.Sub(e_k, op.Mul(tau, e_k))
    return block


def _pad_left(rank, cols):
    pads = [0] * (2 * rank)
    pads[rank - 1] = cols
    return pads


def _pad_right(rank, cols):
    pads = [0] * (2 * rank)
    pads[2 * rank - 1] = cols
    return pads


def _pad_bottom(rank, rows):
    pads = [0] * (2 * rank)
    pads[2 * rank - 2] = rows
    return pads


def _two_sided_reduce(ctx, a, a_aval):
    """Householder reduction to upper Hessenberg form (tridiagonal for symmetric input):
    ``(W, V, taus)`` with W the reduced matrix (zeros below the subdiagonal) and V the reflectors
    stored below the subdiagonal (zeros elsewhere). W is kept clean below the subdiagonal so that a
    reflector applied from the left leaves the finished columns exactly as they are."""
    n, _ = mx.static_matrix_dims(ctx, a_aval, "the matrix")
    batch = mx.batch_shape(a_aval)
    dtype = np.dtype(a_aval.dtype)
    rank = len(a_aval.shape)
    k_steps = max(n - 1, 0)
    taus0 = mx.expand_to(ctx, ctx.const(np.zeros(k_steps, dtype=dtype)), [*batch, k_steps])
    v0 = ctx.op.Where(ctx.const(np.zeros((1,) * rank, dtype=bool)), a, 0.0)
    if k_steps == 0:
        return a, v0, taus0

    def step(sub, k, w, vs, taus):
        op = sub.op
        rows_c, cols = mx.iota(sub, n, [n, 1]), mx.iota(sub, n)
        col_k = op.Equal(cols, k)
        k1 = op.Add(k, sub.i64(1))
        x = mx.pick(sub, w, col_k, -1)  # [..., n, 1]
        at, below = op.Equal(rows_c, k1), op.Greater(rows_c, k1)
        alpha = mx.pick(sub, x, at, -2)
        tail = op.Where(below, x, 0.0)
        xnorm2 = op.ReduceSum(op.Mul(tail, tail), sub.i64([-2]), keepdims=1)
        none = op.Equal(xnorm2, 0.0)
        norm = op.Sqrt(op.Add(op.Mul(alpha, alpha), xnorm2))
        beta = op.Where(op.Less(alpha, 0.0), norm, op.Neg(norm))
        tau = op.Where(none, 0.0, op.Div(op.Sub(beta, alpha), op.Where(none, 1.0, beta)))
        v = op.Where(at, 1.0, op.Div(tail, op.Where(none, 1.0, op.Sub(alpha, beta))))
        vt = mx.swap_last_axes(sub, v, rank)
        w = op.Sub(w, op.Mul(op.Mul(tau, v), op.MatMul(vt, w)))  # H W
        w = op.Sub(w, op.Mul(op.MatMul(w, v), op.Mul(tau, vt)))  # (H W) H
        new_col = op.Where(at, op.Where(none, alpha, beta), op.Where(below, 0.0, mx.pick(sub, w, col_k, -1)))
        w = op.Where(col_k, new_col, w)
        vs = op.Where(op.And(col_k, below), v, vs)
        taus = op.Where(op.Equal(mx.iota(sub, k_steps), k), op.Squeeze(tau, sub.i64([-1])), taus)
        return [w, vs, taus]

    return mx.loop(ctx, k_steps, [(a, a_aval), (v0, a_aval), (taus0, mx.aval([*batch, k_steps], dtype))], step,
                   "gehrd_step")


def _below_subdiagonal(n):
    return np.tril(np.ones((n, n), dtype=bool), -2)


@lowerings.register("hessenberg")
def lower_hessenberg(ctx, a):
    mx.require_real(ctx)
    a_aval = ctx.avals_in[0]
    n, _ = mx.static_matrix_dims(ctx, a_aval, "the matrix")
    w, vs, taus = _two_sided_reduce(ctx, a, a_aval)
    return [ctx.op.Where(ctx.const(_below_subdiagonal(n)), vs, w), taus]


def _reverse_matrix(ctx, x):
    big = np.iinfo(np.int64).min
    return ctx.op.Slice(x, ctx.i64([-1, -1]), ctx.i64([big, big]), ctx.i64([-2, -1]), ctx.i64([-1, -1]))


def _reverse_last(ctx, x):
    return ctx.op.Slice(x, ctx.i64([-1]), ctx.i64([np.iinfo(np.int64).min]), ctx.i64([-1]), ctx.i64([-1]))


@lowerings.register("tridiagonal")
def lower_tridiagonal(ctx, a):
    mx.require_real(ctx)
    a_aval = ctx.avals_in[0]
    n, _ = mx.static_matrix_dims(ctx, a_aval, "the matrix")
    rank = len(a_aval.shape)
    lower = bool(ctx.params.get("lower", True))
    op = ctx.op
    tril = np.tril(np.ones((n, n), dtype=bool))
    sym = op.Where(ctx.const(tril), a, mx.swap_last_axes(ctx, a, rank))  # sytrd reads the lower triangle
    if not lower:  # the upper triangle, reversed: its lower reduction is sytrd's upper variant
        sym = _reverse_matrix(ctx, op.Where(ctx.const(tril.T), a, mx.swap_last_axes(ctx, a, rank)))
    w, vs, taus = _two_sided_reduce(ctx, sym, a_aval)
    packed = op.Where(ctx.const(_below_subdiagonal(n)), vs, w)
    eye, sub_diag = np.eye(n, dtype=bool), np.eye(n, k=-1, dtype=bool)
    d = op.ReduceSum(op.Where(ctx.const(eye), w, 0.0), ctx.i64([-1]), keepdims=0)
    e = op.ReduceSum(op.Where(ctx.const(sub_diag), w, 0.0), ctx.i64([-1]), keepdims=0)
    e = op.Slice(e, ctx.i64([1]), ctx.i64([n]), ctx.i64([-1]))  # row i+1 holds e[i]
    if lower:
        return [op.Where(ctx.const(tril), packed, a), d, e, taus]
    packed = _reverse_matrix(ctx, packed)
    return [op.Where(ctx.const(tril.T), packed, a), _reverse_last(ctx, d), _reverse_last(ctx, e),
            _reverse_last(ctx, taus)]


@lowerings.register("geqrf")
def lower_geqrf(ctx, a):
    mx.require_real(ctx)
    return list(_geqrf(ctx, a, ctx.avals_in[0]))


@lowerings.register("householder_product")
def lower_householder_product(ctx, a, taus):
    mx.require_real(ctx)
    a_aval = ctx.avals_in[0]
    mx.static_matrix_dims(ctx, a_aval, "the reflectors")
    return _householder_product(ctx, a, taus, a_aval, int(a_aval.shape[-1]))


@lowerings.register("qr")
def lower_qr(ctx, a):
    mx.require_real(ctx)
    if ctx.params.get("pivoting"):
        raise NotImplementedError("qr with pivoting=True has no ONNX lowering; use pivoting=False")
    a_aval = ctx.avals_in[0]
    m, n = mx.static_matrix_dims(ctx, a_aval, "the matrix")
    full = bool(ctx.params["full_matrices"])
    k = min(m, n)
    r, taus = _geqrf(ctx, a, a_aval)
    q = _householder_product(ctx, r, taus, a_aval, m if full else k)
    r_rows = m if full else k
    upper = np.triu(np.ones((r_rows, n), dtype=bool))
    if r_rows != m:
        r = ctx.op.Slice(r, ctx.i64([0]), ctx.i64([r_rows]), ctx.i64([-2]))
    return [q, ctx.op.Where(ctx.const(upper), r, 0.0)]

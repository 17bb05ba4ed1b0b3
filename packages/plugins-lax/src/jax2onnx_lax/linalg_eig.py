"""lax.linalg ``eigh`` and ``svd`` by parallel cyclic Jacobi rotations (ONNX has no eigen-solver).

Both run sweeps of rotations in an ONNX ``Loop`` that stops once the matrix has converged (or after
a cap of sweeps). A sweep is ``N - 1`` rounds of the round-robin ("circle") ordering: each round
rotates ``N/2`` disjoint index pairs at once, applied as ``c * rows + s * partner rows`` (a row
Gather and elementwise ops, O(N^2), see :class:`_Round`); the rounds of a sweep are unrolled in the
sweep's body (constant index tables) up to 16x16, an inner Loop beyond. An odd ``n`` is padded with
a zero row/column whose rotations are exactly the identity, and sliced off at the end.

- ``eigh``: two-sided Jacobi ``A <- J^T A J``, ``V <- V J`` (the symmetric Schur 2x2 rotation of Golub
  and Van Loan) on the triangle JAX names (``lower``); stops when the off-diagonal Frobenius norm is
  below ``sqrt(n) * eps * ||A||_F`` (just above the rounding floor). Eigenvalues come out ascending as JAX sorts them.
- ``svd``: one-sided (Hestenes) Jacobi on the columns of ``A`` (of ``A^T`` when wider than tall)
  until every column pair is orthogonal to ``eps``; singular values are the column norms, sorted
  descending. ``full_matrices`` completes the square factor with a Householder QR of the thin one.

Signs: an eigenvector or a singular-vector pair is only defined up to sign, and LAPACK's choice is
not reproducible by a different algorithm. The exported model returns the vectors Jacobi produces
(normalised, orthogonal); compare them with JAX after fixing each column's sign (for example so that
its largest-magnitude entry is positive), as the testcases here do. A zero singular value's left
vector is zero in the thin ``u`` (LAPACK fills in an orthonormal completion), which does not change
``u @ diag(s) @ vt``, ``pinv`` or ``lstsq``; and ``u = A v / s`` is orthonormal to ``eps * s_max / s``
(LAPACK's to ``eps``), so the columns of tiny singular values of an ill-conditioned matrix are less
orthogonal than LAPACK's, while ``u s v^T`` reproduces A to a few eps.

Accuracy: after the sweeps V is re-orthonormalised by one Newton-Schulz step and the eigenvalues
(Rayleigh quotients with the input) or the columns ``A v`` are recomputed from the input, so the
rounding of hundreds of rotation rounds does not reach the result: for 64x64 inputs the residuals
``||V diag(w) V^T - A|| / ||A||`` and ``||U S V^T - A|| / ||A||`` are within 2x of JAX's (LAPACK's),
float32 and float64, condition numbers 1 to 1e4 (f32) / 1e8 (f64); see bench/linalg_bench.py.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from jax2onnx.plugin import Lowerings

from . import _matrix as mx
from .linalg_factor import _geqrf, _householder_product

lowerings = Lowerings()

#: Sweep caps; Jacobi converges quadratically and small matrices need 5-8 sweeps.
_MAX_SWEEPS = {np.dtype(np.float32): 15, np.dtype(np.float64): 20}


def _round_robin(n_even: int) -> tuple[np.ndarray, np.ndarray]:
    """``(P, Q)`` of shape ``[n_even - 1, n_even / 2]``: round r rotates pairs ``(P[r, i], Q[r, i])``
    (``P < Q``); over the rounds every pair occurs exactly once."""
    others = list(range(1, n_even))
    ps, qs = [], []
    for _ in range(n_even - 1):
        players = [0, *others]
        pairs = [(players[i], players[n_even - 1 - i]) for i in range(n_even // 2)]
        ps.append([min(p) for p in pairs])
        qs.append([max(p) for p in pairs])
        others = others[-1:] + others[:-1]
    return np.asarray(ps, dtype=np.int64), np.asarray(qs, dtype=np.int64)


def _rotation(sub, a_pp, a_qq, a_pq):
    """``(c, s)`` zeroing the pair's off-diagonal entry of ``[[a_pp, a_pq], [a_pq, a_qq]]``:
    ``theta = (a_qq - a_pp) / (2 a_pq)``, ``t = sign(theta) / (|theta| + sqrt(1 + theta^2))``.
    A zero ``a_pq`` (converged, or the padding index) is the identity, exactly."""
    op = sub.op
    zero = op.Equal(a_pq, 0.0)
    theta = op.Div(op.Sub(a_qq, a_pp), op.Mul(op.Where(zero, 1.0, a_pq), 2.0))
    t = op.Reciprocal(op.Add(op.Abs(theta), op.Sqrt(op.Add(op.Mul(theta, theta), 1.0))))
    t = op.Where(zero, 0.0, op.Where(op.Less(theta, 0.0), op.Neg(t), t))  # sign(theta), with sign(0) = 1
    c = op.Reciprocal(op.Sqrt(op.Add(op.Mul(t, t), 1.0)))
    return c, op.Mul(t, c)


class _Round:
    """One round's index tables, constants when the rounds are unrolled, gathered by the round number
    inside a Loop otherwise.

    A round's J (``J[p,p] = J[q,q] = c``, ``J[p,q] = s``, ``J[q,p] = -s`` per pair) is applied without
    a MatMul: ``J^T X = cvec * X + svec * X[partner, :]`` with ``cvec = c`` at p and q, ``svec = -s``
    at p and ``s`` at q (columns [..., N, 1]): O(N^2) per round instead of O(N^3), and the same
    products and sums a MatMul with J forms (its other terms are exact zeros). Only rows are
    gathered (onnxruntime's Gather along the last axis copies element by element, ~30x slower), so
    the algorithms keep the transposes of the matrices whose columns rotate."""

    def __init__(self, partner, pair_of, sign, flat_idx, gram_idx):
        self.partner, self.pair_of, self.sign = partner, pair_of, sign
        self.flat_idx, self.gram_idx = flat_idx, gram_idx

    def vectors(self, sub, c, s):
        """``(cvec, svec)`` [..., N, 1] from the pairs' ``c``, ``s`` [..., N/2, 1]."""
        op = sub.op
        return op.Gather(c, self.pair_of, axis=-2), op.Mul(op.Gather(s, self.pair_of, axis=-2), self.sign)

    def left_t(self, sub, x, cvec, svec):
        """``J^T X``."""
        op = sub.op
        return op.Add(op.Mul(x, cvec), op.Mul(op.Gather(x, self.partner, axis=-2), svec))


def _round_tables(n_even, dtype):
    """Per round r ([R, ...] stacks): the partner of every index, the pair each index belongs to,
    the sign of s at each index (-1 at p, +1 at q), the flat indices of ``(a_pp, a_qq, a_pq)`` in an
    ``N x N`` matrix and of ``(|g_p|^2, |g_q|^2, g_p . g_q)`` in ``[|g_j|^2 (N), g_j . g_partner(j) (N)]``."""
    p_tab, q_tab = _round_robin(n_even)
    rounds, half = p_tab.shape
    partner = np.zeros((rounds, n_even), np.int64)
    pair_of = np.zeros((rounds, n_even), np.int64)
    sign = np.zeros((rounds, n_even), dtype)
    for r in range(rounds):
        partner[r, p_tab[r]], partner[r, q_tab[r]] = q_tab[r], p_tab[r]
        pair_of[r, p_tab[r]] = pair_of[r, q_tab[r]] = np.arange(half)
        sign[r, p_tab[r]], sign[r, q_tab[r]] = -1.0, 1.0
    # [R, N/2, 3]: gathered along the last axis of a flattened [..., N*N] (or [..., 2N]), split into
    # three [..., N/2, 1] columns
    flat = np.stack([p_tab * (n_even + 1), q_tab * (n_even + 1), p_tab * n_even + q_tab], axis=-1)
    gram = np.stack([p_tab, q_tab, p_tab + n_even], axis=-1)
    return partner, pair_of, sign[:, :, None], flat, gram


#: Rounds per sweep up to this are unrolled inside the sweep's Loop body (constant tables, no
#: inner Loop). Measured, one float32 sweep, inner Loop -> unrolled: n = 8: 0.16 -> 0.14 ms,
#: 16: 0.36 -> 0.33 ms, but 64: 2.6 -> 3.2 ms and 128: 9.6 -> 11.5 ms (onnxruntime runs a Loop
#: body of thousands of nodes slower per node than a short one iterated).
_UNROLL_ROUNDS = 15


def _sweeps(ctx, state, round_fn, converged_fn, n_even, dtype, name):
    """Loop of sweeps (each ``n_even - 1`` rounds, unrolled or an inner Loop) until ``converged_fn``.
    ``round_fn(sub, rnd, *state) -> new state`` with ``rnd`` a :class:`_Round`."""
    tables = _round_tables(n_even, dtype)
    rounds = n_even - 1

    def sweep(sub, _k, *st):
        if rounds <= _UNROLL_ROUNDS:
            for r in range(rounds):
                st = round_fn(sub, _Round(*(sub.const(t[r]) for t in tables)), *st)
            return st

        def one_round(inner, r, *st_):
            rnd = _Round(*(inner.op.Gather(inner.const(t), r, axis=0) for t in tables))
            return round_fn(inner, rnd, *st_)

        return mx.loop(sub, rounds, [(v, a) for v, (_, a) in zip(st, state, strict=True)], one_round,
                       f"{name}_round")

    return mx.loop(ctx, _MAX_SWEEPS.get(np.dtype(dtype), 20), state, sweep, f"{name}_sweep", until=converged_fn)


def _sort_columns(ctx, values, vectors, largest, n):
    """``values`` [..., n] sorted (TopK), ``vectors``' columns [..., m, n] in the same order."""
    sorted_vals, idx = ctx.op.TopK(values, ctx.i64([n]), axis=-1, largest=int(largest), sorted=1, _outputs=2)
    if vectors is None:
        return sorted_vals, None, idx
    idx_m = ctx.op.Expand(ctx.op.Unsqueeze(idx, ctx.i64([-2])), ctx.op.Shape(vectors))
    return sorted_vals, ctx.op.GatherElements(vectors, idx_m, axis=-1), idx


def _orthonormalize(ctx, v, rank, n):
    """One Newton-Schulz step ``V (3 I - V^T V) / 2``: hundreds of rounded rotations leave V off
    orthogonal by ~sqrt(rounds) eps; one step brings that to ~eps^2, at the cost of two MatMuls."""
    op = ctx.op
    gram = op.MatMul(mx.swap_last_axes(ctx, v, rank), v)
    dtype = np.float64 if v.type is not None and v.type.dtype == ir.DataType.DOUBLE else np.float32
    return op.MatMul(v, op.Sub(ctx.const(1.5 * np.eye(n, dtype=dtype)), op.Mul(gram, 0.5)))


def _polish(ctx, a, v, rank):
    """``(V, w)``: V re-orthonormalised, w the Rayleigh quotients ``diag(V^T A V)`` with the input A
    (not the rotated matrix, whose rounding grew with every round)."""
    op = ctx.op
    n = int(ctx.avals_in[0].shape[-1])
    v = _orthonormalize(ctx, v, rank, n)
    av = op.MatMul(a, v)
    w = op.ReduceSum(op.Mul(v, av), ctx.i64([-2]), keepdims=0)
    return v, w


def _pad_square(ctx, x, rank, n_rows_pad, n_cols_pad):
    if not (n_rows_pad or n_cols_pad):
        return x
    pads = [0] * (2 * rank)
    pads[rank - 2 + rank] = n_rows_pad
    pads[rank - 1 + rank] = n_cols_pad
    return ctx.op.Pad(x, ctx.i64(pads))


# ---------------------------------------------------------------------------------------------
# eigh


@lowerings.register("eigh")
def lower_eigh(ctx, a):
    mx.require_real(ctx)
    a_aval = ctx.avals_in[0]
    n, _ = mx.static_matrix_dims(ctx, a_aval, "the matrix")
    rank = len(a_aval.shape)
    dtype = np.dtype(a_aval.dtype)
    batch = mx.batch_shape(a_aval)
    tri = np.tril(np.ones((n, n), dtype=bool)) if ctx.params.get("lower", True) else np.triu(np.ones((n, n), dtype=bool))
    sym = ctx.op.Where(ctx.const(tri), a, mx.swap_last_axes(ctx, a, rank))
    n_even = n + n % 2
    work = _pad_square(ctx, sym, rank, n_even - n, n_even - n)
    work_aval = mx.aval([*batch, n_even, n_even], dtype)
    v0 = mx.expand_to(ctx, ctx.const(np.eye(n_even, dtype=dtype)), [*batch, n_even, n_even])
    eye_mask = np.eye(n_even, dtype=bool)
    fro2 = ctx.op.ReduceSum(ctx.op.Mul(work, work), ctx.i64([-2, -1]), keepdims=0)
    # Rounding keeps the off-diagonal norm at a floor of ~1-3 eps ||A|| (measured, n = 16..64), so a
    # bound of eps ||A|| is never met and every matrix ran to the sweep cap; sqrt(n) eps ||A|| lies
    # above the floor and one sweep below the last quadratic step (64x64: 7 sweeps instead of 15).
    tol2 = ctx.op.Mul(fro2, float(np.sqrt(n_even) * np.finfo(dtype).eps) ** 2)

    if n_even < 2:  # 1x1 (padded to 2x2 it would still be diagonal): nothing to rotate
        w = ctx.op.ReduceSum(sym, ctx.i64([-1]), keepdims=0)
        return [mx.expand_to(ctx, ctx.const(np.eye(n, dtype=dtype)), [*batch, n, n]), w]

    def round_fn(sub, rnd, w_, vt):
        op = sub.op
        flat = op.Reshape(w_, sub.i64([0] * (rank - 2) + [n_even * n_even]))
        a_pp, a_qq, a_pq = op.Split(op.Gather(flat, rnd.flat_idx, axis=-1), sub.i64([1, 1, 1]), axis=-1,
                                    _outputs=3)  # each [..., N/2, 1]
        c, s = _rotation(sub, a_pp, a_qq, a_pq)
        cvec, svec = rnd.vectors(sub, c, s)
        # J^T (J^T W)^T = (J^T W J)^T: one transpose, rows gathered only; W stays symmetric to rounding
        w_new = rnd.left_t(sub, mx.swap_last_axes(sub, rnd.left_t(sub, w_, cvec, svec), rank), cvec, svec)
        return [w_new, rnd.left_t(sub, vt, cvec, svec)]  # V^T <- J^T V^T

    def converged(sub, w_, _v):
        op = sub.op
        off = op.Where(sub.const(eye_mask), 0.0, w_)
        off2 = op.ReduceSum(op.Mul(off, off), sub.i64([-2, -1]), keepdims=0)
        not_done = op.Greater(off2, tol2)
        return op.Not(op.Cast(op.ReduceMax(op.Cast(not_done, to=6), keepdims=0), to=9))

    w_mat, vt = _sweeps(ctx, [(work, work_aval), (v0, work_aval)], round_fn, converged, n_even, dtype, "jacobi")
    del w_mat  # the eigenvalues are recomputed from the polished vectors below
    v = mx.swap_last_axes(ctx, vt, rank)
    if n_even != n:
        v = ctx.op.Slice(v, ctx.i64([0, 0]), ctx.i64([n, n]), ctx.i64([-2, -1]))
    v, w = _polish(ctx, sym, v, rank)
    if ctx.params.get("sort_eigenvalues", True):
        w, v, _ = _sort_columns(ctx, w, v, largest=False, n=n)
    subset = ctx.params.get("subset_by_index")
    if subset is not None and tuple(subset) != (0, n):
        lo, hi = (int(i) for i in subset)
        w = ctx.op.Slice(w, ctx.i64([lo]), ctx.i64([hi]), ctx.i64([-1]))
        v = ctx.op.Slice(v, ctx.i64([lo]), ctx.i64([hi]), ctx.i64([-1]))
    return [v, w]


# ---------------------------------------------------------------------------------------------
# svd


@lowerings.register("svd")
def lower_svd(ctx, a):
    mx.require_real(ctx)
    p = ctx.params
    a_aval = ctx.avals_in[0]
    m, n = mx.static_matrix_dims(ctx, a_aval, "the matrix")
    subset = p.get("subset_by_index")
    if subset is not None and tuple(subset) != (0, min(m, n)):
        raise NotImplementedError(f"svd: subset_by_index={subset} has no ONNX lowering; slice the full result")
    rank = len(a_aval.shape)
    dtype = np.dtype(a_aval.dtype)
    batch = mx.batch_shape(a_aval)
    wide = m < n
    x = mx.swap_last_axes(ctx, a, rank) if wide else a
    rows, cols = (n, m) if wide else (m, n)  # x is rows x cols, rows >= cols
    n_even = cols + cols % 2
    g0 = mx.swap_last_axes(ctx, _pad_square(ctx, x, rank, 0, n_even - cols), rank)  # G^T: its rows rotate
    g_aval = mx.aval([*batch, n_even, rows], dtype)
    v_aval = mx.aval([*batch, n_even, n_even], dtype)
    v0 = mx.expand_to(ctx, ctx.const(np.eye(n_even, dtype=dtype)), [*batch, n_even, n_even])
    eye_mask = np.eye(n_even, dtype=bool)
    eps = float(np.finfo(dtype).eps)

    def round_fn(sub, rnd, gt, vt):
        op = sub.op
        axis = sub.i64([-1])
        norms = op.ReduceSum(op.Mul(gt, gt), axis, keepdims=0)  # [..., N]
        flat = op.Concat(norms, op.ReduceSum(op.Mul(gt, op.Gather(gt, rnd.partner, axis=-2)), axis, keepdims=0),
                         axis=-1)  # [..., 2N]: |g_j|^2, then g_j . g_partner(j)
        alpha, beta, gamma = op.Split(op.Gather(flat, rnd.gram_idx, axis=-1), sub.i64([1, 1, 1]), axis=-1,
                                      _outputs=3)  # each [..., N/2, 1]
        c, s = _rotation(sub, alpha, beta, gamma)
        cvec, svec = rnd.vectors(sub, c, s)
        return [rnd.left_t(sub, gt, cvec, svec), rnd.left_t(sub, vt, cvec, svec)]  # (G J)^T, (V J)^T

    def converged(sub, gt, _v):
        """Every column pair orthogonal to ``eps``: ``|g_p . g_q| <= eps * |g_p| |g_q|``."""
        op = sub.op
        gram = op.MatMul(gt, mx.swap_last_axes(sub, gt, rank))
        d = op.ReduceSum(op.Where(sub.const(eye_mask), gram, 0.0), sub.i64([-1]), keepdims=0)
        scale = op.Mul(op.Unsqueeze(d, sub.i64([-1])), op.Unsqueeze(d, sub.i64([-2])))
        off = op.Where(sub.const(eye_mask), 0.0, gram)
        bad = op.Greater(op.Mul(off, off), op.Mul(scale, (eps * rows) ** 2))
        return op.Not(op.Cast(op.ReduceMax(op.Cast(bad, to=6), keepdims=0), to=9))

    if n_even >= 2:
        _, vt = _sweeps(ctx, [(g0, g_aval), (v0, v_aval)], round_fn, converged, n_even, dtype, "svd_jacobi")
        v = mx.swap_last_axes(ctx, vt, rank)
    else:
        v = v0
    op = ctx.op
    if n_even != cols:
        v = op.Slice(v, ctx.i64([0, 0]), ctx.i64([cols, cols]), ctx.i64([-2, -1]))
    # polish: V re-orthonormalised and the columns recomputed from the input (the rotated columns
    # carry the rounding of every round), so u s v^T reproduces A to a few eps
    v = _orthonormalize(ctx, v, rank, cols)
    g = op.MatMul(x, v)
    s = op.Sqrt(op.ReduceSum(op.Mul(g, g), ctx.i64([-2]), keepdims=0))  # [..., cols]
    if not p["compute_uv"]:
        s, _, _ = _sort_columns(ctx, s, None, largest=True, n=cols)
        return [s]
    s, v, idx = _sort_columns(ctx, s, v, largest=True, n=cols)
    idx_g = op.Expand(op.Unsqueeze(idx, ctx.i64([-2])), op.Shape(g))
    g = op.GatherElements(g, idx_g, axis=-1)
    s_row = op.Unsqueeze(s, ctx.i64([-2]))
    positive = op.Greater(s_row, 0.0)
    u = op.Where(positive, op.Div(g, op.Where(positive, s_row, 1.0)), 0.0)  # [..., rows, cols]
    if p["full_matrices"] and rows > cols:
        u_aval = mx.aval([*batch, rows, cols], dtype)
        r, taus = _geqrf(ctx, u, u_aval)
        q = _householder_product(ctx, r, taus, u_aval, rows)  # [..., rows, rows], q[:, :cols] = +-u
        q_thin = op.Slice(q, ctx.i64([0]), ctx.i64([cols]), ctx.i64([-1]))
        q_rest = op.Slice(q, ctx.i64([cols]), ctx.i64([rows]), ctx.i64([-1]))
        u = op.Concat(op.Where(positive, u, q_thin), q_rest, axis=-1)
    if wide:  # a^T = u s v^T  =>  a = v s u^T
        return [s, v, mx.swap_last_axes(ctx, u, rank)]
    return [s, u, mx.swap_last_axes(ctx, v, rank)]

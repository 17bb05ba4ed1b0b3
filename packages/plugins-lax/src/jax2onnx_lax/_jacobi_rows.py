"""Jacobi rounds applied row by row, for the large matrices of :mod:`.linalg_eig`.

A round rotates ``N/2`` disjoint index pairs of the round-robin ("circle") ordering in place, as
``c * rows + s * partner rows`` (a row Gather and elementwise ops: O(N^2) a round, where the dense
transforms of :class:`.linalg_eig._Rounds` are O(N^3) a block of three rounds). Measured in
onnxruntime, one thread (bench/results/linalg.md): at 64 and 128 the dense transforms are faster
(a 64x64 MatMul costs what a few passes over the matrix do, and a block needs a fraction of the
nodes), at 256 these rounds are (eigh 256: 288 ms here against 410 ms dense).

The rounds pair different indices each round, so a round's index tables are constants when the
rounds of a sweep are unrolled and gathered by the round number inside a Loop otherwise. The states
and the convergence tests are those of :mod:`.linalg_eig`: ``[A, V^T]`` for eigh, ``[G^T, V^T]``
for svd (only rows are rotated, so the algorithms keep the transposes of the matrices whose
columns rotate)."""

from __future__ import annotations

import numpy as np

from . import _matrix as mx


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
    """One round's index tables (constants, or gathered by the round number inside a Loop).

    A round's J (``J[p,p] = J[q,q] = c``, ``J[p,q] = s``, ``J[q,p] = -s`` per pair) is applied without
    a MatMul: ``J^T X = cvec * X + svec * X[partner, :]`` with ``cvec = c`` at p and q, ``svec = -s``
    at p and ``s`` at q (columns [..., N, 1]), the same products and sums a MatMul with J forms (its
    other terms are exact zeros). Only rows are gathered (onnxruntime's Gather along the last axis
    copies element by element, ~30x slower)."""

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
#: inner Loop); onnxruntime runs a Loop body of thousands of nodes slower per node than a short
#: one iterated (one float32 sweep at 128: 9.6 ms as an inner Loop, 11.5 ms unrolled).
UNROLL_ROUNDS = 15


def eigh_round(rank, n_even):
    """The two-sided round ``A <- J^T A J``, ``V^T <- J^T V^T`` on the state ``[A, V^T]``."""

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

    return round_fn


def svd_round(sub, rnd, gt, vt):
    """The one-sided round ``G <- G J``, ``V <- V J`` on the state ``[G^T, V^T]``, its 2x2 problems
    from the current columns."""
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


def sweeps(ctx, state, round_fn, converged_fn, n_even, dtype, name, max_sweeps):
    """Loop of sweeps (each ``n_even - 1`` rounds, unrolled or an inner Loop) until ``converged_fn``.
    ``round_fn(sub, rnd, *state) -> new state`` with ``rnd`` a :class:`_Round`."""
    tables = _round_tables(n_even, dtype)
    rounds = n_even - 1

    def sweep(sub, _k, *st):
        if rounds <= UNROLL_ROUNDS:
            for r in range(rounds):
                st = round_fn(sub, _Round(*(sub.const(t[r]) for t in tables)), *st)
            return st

        def one_round(inner, r, *st_):
            rnd = _Round(*(inner.op.Gather(inner.const(t), r, axis=0) for t in tables))
            return round_fn(inner, rnd, *st_)

        return mx.loop(sub, rounds, [(v, a) for v, (_, a) in zip(st, state, strict=True)], one_round,
                       f"{name}_round")

    return mx.loop(ctx, max_sweeps, state, sweep, f"{name}_sweep", until=converged_fn)

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


def _schedule(n_even: int) -> tuple[np.ndarray, np.ndarray]:
    """The round-robin ("circle") ordering with every round's pairs at the positions ``(2i, 2i+1)``.

    Instead of pairing different indices each round, the rotated matrix is permuted after each
    round so that the next round's pairs are adjacent again: every round is the same computation
    with the same constant tables, and after ``n_even - 1`` rounds (a sweep) the positions are back
    in their original order. Slots of the circle (slot 0 fixed, the others shifted one step a round)
    sit at positions ``2i`` (slot i) and ``2i + 1`` (slot ``n - 1 - i``).

    Returns ``(src, sel)``: the element at position ``k`` after a round comes from position
    ``src[k]`` of the rotated matrix, which is row ``src[k] % 2`` of its pair's rotation; ``gather``
    ``[n, 2]`` holds that pair's two positions, and ``sel`` ``[2n, n]`` maps the pairs' ``(c, s)``
    (flattened ``[n]``) to the two coefficients of each output position (``(c, -s)`` for the pair's
    first row, ``(s, c)`` for its second: the rows of ``J^T``)."""
    half = n_even // 2
    pos_of_slot = np.empty(n_even, np.int64)
    pos_of_slot[:half] = 2 * np.arange(half)
    pos_of_slot[n_even - 1 - np.arange(half)] = 2 * np.arange(half) + 1
    slot_of_pos = np.argsort(pos_of_slot)
    # slot s >= 1 holds next round what slot s - 1 held (slot 1 what slot n - 1 held)
    prev_slot = np.asarray([0] + [1 + (s - 2) % (n_even - 1) for s in range(1, n_even)], np.int64)
    src = pos_of_slot[prev_slot[slot_of_pos]]
    pair, role = src // 2, src % 2
    gather = np.stack([2 * pair, 2 * pair + 1], axis=-1)
    sel = np.zeros((2 * n_even, n_even))
    for k in range(n_even):
        if role[k] == 0:  # c * row_p - s * row_q
            sel[2 * k, 2 * pair[k]], sel[2 * k + 1, 2 * pair[k] + 1] = 1.0, -1.0
        else:  # s * row_p + c * row_q
            sel[2 * k, 2 * pair[k] + 1], sel[2 * k + 1, 2 * pair[k]] = 1.0, 1.0
    return gather, sel


class _Rounds:
    """The constant tables of a round (:func:`_schedule`) and the round's pieces, for matrices
    ``[..., n_even, width]`` whose rows rotate (the transposes are kept where columns rotate).

    A round: the pairs' 2x2 problems ``(a_pp, a_qq, a_pq)`` -> ``(c, s)`` (:meth:`rotations`), then
    ``Q^T = P^T J^T`` as a dense matrix (:meth:`transform`: its two nonzeros a row scattered into
    zeros), applied to each matrix by one MatMul. Measured in onnxruntime at N = 64, one thread: a
    64x64 MatMul takes ~2.6 us, applying the rows' pairs elementwise (two row Gathers, two Muls, an
    Add) ~3.5 us, and a Gather of both rows of each pair with a Mul and a ReduceSum ~7 us; every
    pass over a 64x64 matrix costs ~0.5 us, a node on a few values ~0.15 us. The MatMul's other
    terms are products with exact zeros, so its result is that of the two-term rotation."""

    def __init__(self, ctx, n_even, rank, dtype, batch):
        gather, sel = _schedule(n_even)
        self.n, self.rank, self.dtype = n_even, rank, np.dtype(dtype)
        self.sel = ctx.const(sel.astype(dtype))
        # ScatterElements along the last axis: row k of Q^T gets its two coefficients at the pair's
        # two columns; the index and the zeros carry the batch dims (built once, outside the Loops)
        self.columns = mx.expand_to(ctx, ctx.const(gather), [*batch, n_even, 2])
        self.zeros = mx.expand_to(ctx, ctx.const(np.zeros((n_even, n_even), dtype)), [*batch, n_even, n_even])
        # (a_pp, a_qq, a_pq) -> (a_qq - a_pp, 2 a_pq); a tiny offset on the first keeps the pair's
        # vector nonzero when both are zero (the rotation is then the identity, exactly)
        self.diff = ctx.const(np.asarray([[-1.0, 0.0], [1.0, 0.0], [0.0, 2.0]], dtype))
        self.tiny = ctx.const(np.asarray([_TINY[self.dtype], 0.0], dtype))
        self.sign_neg = ctx.const(np.asarray([-1.0, 0.0], dtype))
        self.sign_pos = ctx.const(np.asarray([1.0, 0.0], dtype))
        self.flat_shape = ctx.i64([0] * (rank - 2) + [n_even, 1])
        self.coef_shape = ctx.i64([0] * (rank - 2) + [n_even, 2])

    def rotations(self, sub, triples):
        """``(c, s)`` [..., N/2, 2] of each pair from its ``(a_pp, a_qq, a_pq)`` [..., N/2, 3].

        The pair's rotation is the 2x2 problem's eigenvector ``(d + sign(d) r, e)`` normalised
        (``d = a_qq - a_pp``, ``e = 2 a_pq``, ``r = hypot(d, e)``), which is Rutishauser's stable
        ``(1, t)`` with ``t = sign(d) e / (|d| + r)`` (the smaller angle, no cancellation) up to a
        common sign (``-J`` rotates as well as ``J``). ``e = 0`` gives ``(+-1, 0)``: the identity
        up to an exact sign. Nodes: MatMul, Add, ReduceL2, Less, Where, Mul, Add, LpNormalization.
        The operands are scaled to ``max |a| = 1`` beforehand, so ``r`` neither overflows nor
        underflows and the offset is far below the rounding of any entry that matters."""
        op = sub.op
        y = op.Add(op.MatMul(triples, self.diff), self.tiny)  # [..., N/2, 2]: (d, e)
        r = op.ReduceL2(y, sub.i64([-1]), keepdims=1)
        sign = op.Where(op.Less(y, 0.0), self.sign_neg, self.sign_pos)  # (sign(d), 0), sign(0) = 1
        return op.LpNormalization(op.Add(y, op.Mul(sign, r)), axis=-1, p=2)

    def transform(self, sub, cs):
        """``Q^T = P^T J^T`` [..., N, N] from the pairs' ``(c, s)``: ``Q^T X`` rotates X's row pairs
        and moves the rows to the next round's positions."""
        op = sub.op
        coef = op.Reshape(op.MatMul(self.sel, op.Reshape(cs, self.flat_shape)), self.coef_shape)  # [..., N, 2]
        return op.ScatterElements(self.zeros, self.columns, coef, axis=-1)


#: The offset keeping a pair's vector nonzero (:meth:`_Rounds.rotations`): its square is a
#: normal number, and it is far below eps on operands scaled to ``max |a| = 1``.
_TINY = {np.dtype(np.float32): 2.0 ** -60, np.dtype(np.float64): 2.0 ** -500}

#: Rounds per sweep up to this are unrolled inside the sweep's Loop body, beyond that the rounds
#: are an inner Loop (every round is the same computation, see :func:`_schedule`).
_UNROLL_ROUNDS = 15


def _sweeps(ctx, state, round_fn, converged_fn, n_even, dtype, name):
    """Loop of sweeps (each ``n_even - 1`` rounds, unrolled or an inner Loop) until ``converged_fn``.
    ``round_fn(sub, *state) -> new state``."""
    rounds = n_even - 1

    def sweep(sub, _k, *st):
        if rounds <= _UNROLL_ROUNDS:
            for _ in range(rounds):
                st = round_fn(sub, *st)
            return st
        return mx.loop(sub, rounds, [(v, a) for v, (_, a) in zip(st, state, strict=True)],
                       lambda inner, _r, *st_: round_fn(inner, *st_), f"{name}_round")

    return mx.loop(ctx, _MAX_SWEEPS.get(np.dtype(dtype), 20), state, sweep, f"{name}_sweep", until=converged_fn)


def _scaled(ctx, x, dtype):
    """``x / max |x|`` per matrix (1 for a zero matrix): keeps the rotations' hypot in range."""
    op = ctx.op
    m = op.ReduceMax(op.Abs(x), ctx.i64([-2, -1]), keepdims=1)
    return op.Div(x, op.Max(m, ctx.const(np.asarray(np.finfo(dtype).tiny, dtype))))


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
    if n_even < 2:  # 1x1 (padded to 2x2 it would still be diagonal): nothing to rotate
        w = ctx.op.ReduceSum(sym, ctx.i64([-1]), keepdims=0)
        return [mx.expand_to(ctx, ctx.const(np.eye(n, dtype=dtype)), [*batch, n, n]), w]
    op = ctx.op
    work = _pad_square(ctx, _scaled(ctx, sym, dtype), rank, n_even - n, n_even - n)
    v0 = mx.expand_to(ctx, ctx.const(np.eye(n_even, dtype=dtype)), [*batch, n_even, n_even])
    work_aval = mx.aval([*batch, n_even, n_even], dtype)
    eye_mask = np.eye(n_even, dtype=bool)
    fro2 = op.ReduceSum(op.Mul(work, work), ctx.i64([-2, -1]), keepdims=0)
    # Rounding keeps the off-diagonal norm at a floor of ~1-3 eps ||A|| (measured, n = 16..64), so a
    # bound of eps ||A|| is never met and every matrix ran to the sweep cap; sqrt(n) eps ||A|| lies
    # above the floor and one sweep below the last quadratic step (64x64: 7 sweeps instead of 15).
    tol2 = op.Mul(fro2, float(np.sqrt(n_even) * np.finfo(dtype).eps) ** 2)
    rounds = _Rounds(ctx, n_even, rank, dtype, batch)
    half = n_even // 2
    diag = np.arange(half) * 2
    triples = np.stack([np.stack([diag, diag], -1), np.stack([diag + 1, diag + 1], -1), np.stack([diag, diag + 1], -1)],
                       axis=1)  # [N/2, 3, 2]: (p, p), (q, q), (p, q) of pair (p, q) = (2i, 2i + 1)
    triples = ctx.const(triples.astype(np.int64))
    if batch:
        triples = mx.expand_to(ctx, triples, [*batch, half, 3, 2])

    def round_fn(sub, w_, vt):
        o = sub.op
        qt = rounds.transform(sub, rounds.rotations(sub, o.GatherND(w_, triples, batch_dims=rank - 2)))
        # A <- Q^T A Q, V^T <- Q^T V^T (V <- V Q)
        return [o.MatMul(o.MatMul(qt, w_), mx.swap_last_axes(sub, qt, rank)), o.MatMul(qt, vt)]

    def converged(sub, w_, _vt):
        o = sub.op
        off = o.Where(sub.const(eye_mask), 0.0, w_)
        off2 = o.ReduceSum(o.Mul(off, off), sub.i64([-2, -1]), keepdims=0)
        not_done = o.Greater(off2, tol2)
        return o.Not(o.Cast(o.ReduceMax(o.Cast(not_done, to=6), keepdims=0), to=9))

    _, vt = _sweeps(ctx, [(work, work_aval), (v0, work_aval)], round_fn, converged, n_even, dtype, "jacobi")
    # the eigenvalues are recomputed from the polished vectors below, not read off the diagonal
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
    eps = float(np.finfo(dtype).eps)
    eye_mask = np.eye(n_even, dtype=bool)
    if n_even >= 2:
        gt0 = mx.swap_last_axes(ctx, _pad_square(ctx, _scaled(ctx, x, dtype), rank, 0, n_even - cols), rank)
        v0 = mx.expand_to(ctx, ctx.const(np.eye(n_even, dtype=dtype)), [*batch, n_even, n_even])
        g_aval = mx.aval([*batch, n_even, rows], dtype)
        v_aval = mx.aval([*batch, n_even, n_even], dtype)
        rounds = _Rounds(ctx, n_even, rank, dtype, batch)
        pair_shape = ctx.i64([0] * (rank - 2) + [n_even // 2, 2, rows])

        def round_fn(sub, gt, vt):  # G^T and V^T: their rows rotate, G <- G Q, V <- V Q
            o = sub.op
            last = sub.i64([-1])
            pairs = o.Reshape(gt, pair_shape)  # [..., N/2, 2, rows]: (g_p, g_q)
            norms = o.ReduceSumSquare(pairs, last, keepdims=0)  # [..., N/2, 2]: |g_p|^2, |g_q|^2
            dots = o.ReduceSum(o.ReduceProd(pairs, sub.i64([-2]), keepdims=0), last, keepdims=1)  # g_p . g_q
            qt = rounds.transform(sub, rounds.rotations(sub, o.Concat(norms, dots, axis=-1)))
            return [o.MatMul(qt, gt), o.MatMul(qt, vt)]

        def converged(sub, gt, _vt):
            """Every column pair orthogonal to ``eps``: ``|g_p . g_q| <= eps * |g_p| |g_q|``."""
            o = sub.op
            gram = o.MatMul(gt, mx.swap_last_axes(sub, gt, rank))
            d = o.ReduceSum(o.Where(sub.const(eye_mask), gram, 0.0), sub.i64([-1]), keepdims=0)
            scale = o.Mul(o.Unsqueeze(d, sub.i64([-1])), o.Unsqueeze(d, sub.i64([-2])))
            off = o.Where(sub.const(eye_mask), 0.0, gram)
            bad = o.Greater(o.Mul(off, off), o.Mul(scale, (eps * rows) ** 2))
            return o.Not(o.Cast(o.ReduceMax(o.Cast(bad, to=6), keepdims=0), to=9))

        _, vt = _sweeps(ctx, [(gt0, g_aval), (v0, v_aval)], round_fn, converged, n_even, dtype, "svd_jacobi")
        v = mx.swap_last_axes(ctx, vt, rank)
    else:
        v = mx.expand_to(ctx, ctx.const(np.eye(n_even, dtype=dtype)), [*batch, n_even, n_even])
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

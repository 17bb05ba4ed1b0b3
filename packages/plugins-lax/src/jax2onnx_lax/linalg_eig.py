"""lax.linalg ``eigh`` and ``svd`` by parallel cyclic Jacobi rotations (ONNX has no eigen-solver).

Both run sweeps of rotations in an ONNX ``Loop`` that stops once the matrix has converged (or after
a cap of sweeps). A sweep is ``N - 1`` rounds of the round-robin ("circle") ordering: each round
rotates ``N/2`` disjoint index pairs at once. Up to 128x128 the pairs are kept at the positions
``(2i, 2i+1)`` by a constant permutation after each round (:func:`_schedule`), so every round is the
same computation; three rounds are combined into one transform with eight nonzeros a row, which is
scattered into a dense matrix and applied by one MatMul a matrix (:class:`_Rounds`). Larger
matrices rotate rows in place, round by round (:mod:`._jacobi_rows`, O(N^2) a round). An odd ``n``
is padded with a zero row/column whose rotations are exactly the identity (up to sign), and sliced
off at the end. The operand is scaled to ``max |a| = 1`` first (the rotations' 2x2 problems use
``hypot``).

- ``eigh``: two-sided Jacobi ``A <- J^T A J``, ``V <- V J`` (the symmetric Schur 2x2 rotation of Golub
  and Van Loan) on the triangle JAX names (``lower``); stops when the off-diagonal Frobenius norm is
  below ``sqrt(n) * eps * ||A||_F`` (just above the rounding floor). Eigenvalues come out ascending as JAX sorts them.
- ``svd``: one-sided (Hestenes) Jacobi on the columns of ``A`` (of ``A^T`` when wider than tall)
  until every column pair is orthogonal to ``eps``; singular values are the column norms, sorted
  descending. ``full_matrices`` completes the square factor with a Householder QR of the thin one.

Signs: an eigenvector or a singular-vector pair is only defined up to sign, and LAPACK's choice is
in general not reproducible by a different algorithm. Where it is determined, the exported model
gives LAPACK's (JAX's CPU) signs: a 1x1 matrix (eigenvector 1; ``u = sign(a)``, ``vt = 1``), a
diagonal eigh (``V`` a permutation of ``I``: a rotation with nothing to rotate is exactly the
identity), and an svd of a single row or column (:func:`_vector_sign`). Otherwise it returns the
vectors Jacobi produces (normalised, orthogonal); compare them with JAX after fixing each column's
sign (for example so that its largest-magnitude entry is positive), as the testcases here do. A
zero singular value's left vector is zero in the thin ``u`` (LAPACK fills in an orthonormal
completion; for a single column, ``e_0`` as LAPACK's), which does not change ``u @ diag(s) @ vt``,
``pinv`` or ``lstsq``; and ``u = A v / s`` is orthonormal to ``eps * s_max / s`` (LAPACK's to
``eps``), so the columns of tiny singular values of an ill-conditioned matrix are less orthogonal
than LAPACK's, while ``u s v^T`` reproduces A to a few eps.

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

from . import _jacobi_rows as row_jacobi
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

    Returns ``(gather, sel)``: the element at position ``k`` after a round comes from position
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
    """The constant tables of the rounds (:func:`_schedule`) and a block of rounds as one transform.

    The matrices whose rows rotate are ``[..., N, width]`` (the transposes are kept where columns
    rotate). A round's ``Q^T = P^T J^T`` has two nonzeros a row, at the columns ``gather[k]``;
    the product ``T`` of ``k`` rounds' has ``2^k`` a row, at columns known in advance, with
    coefficients that are products of the rounds' ``(c, s)``. A block of rounds therefore needs
    the matrices themselves only once: each round's 2x2 problems are read from the block's first
    matrix ``H`` through the transform so far (``(T H T^T)[k, l] = sum_uv T[k, u] T[l, v] H[u, v]``
    over the few nonzeros: three GatherElements), and ``T`` is then scattered into a dense matrix
    and applied by one MatMul a matrix (:meth:`block`).

    Measured in onnxruntime at N = 64, one thread: a 64x64 MatMul takes ~2.6 us; applying a
    round's row pairs elementwise (two row Gathers, two Muls, an Add) ~3.5 us, and a Gather of both
    rows of each pair with a Mul and a ReduceSum ~7 us; every pass over a 64x64 matrix costs
    ~0.5 us, a node on a few hundred values ~0.15-0.3 us. So one round a MatMul (the transform of
    a single round, applied densely: ``Q^T A Q`` and ``Q^T V^T``, three MatMuls a round) was 7.5 ms
    for a 64x64 eigh; three rounds a block, one MatMul a round, ~25% less; with the rotation's
    nodes cut, 4.4 ms, against 10.3 ms for the row-by-row rounds (bench/results/linalg.md).
    The MatMul's other terms are products with exact zeros, so its result is that of the rotations
    applied one by one, rounded differently."""

    def __init__(self, ctx, n_even, rank, dtype, batch, block):
        gather, sel = _schedule(n_even)
        self.n, self.rank, self.dtype, self.batch = n_even, rank, np.dtype(dtype), list(batch)
        self.sel_t = ctx.const(sel.T.astype(dtype))  # [N, 2N]: (c, s) row -> the rows' coefficients
        # the constants the pairs' [..., N/2, 2] meet are full-size: onnxruntime's elementwise ops
        # broadcasting a [2] over them made the whole eigh at 64 6-9% slower (measured)
        half_pairs = (n_even // 2, 1)
        # a tiny offset on d keeps the pair's vector nonzero when d = e = 0 (the rotation is then
        # the identity, exactly)
        self.tiny = ctx.const(np.tile(np.asarray([_TINY[self.dtype], 0.0], dtype), half_pairs))
        self.first = ctx.const(np.asarray([[1.0, 1.0], [0.0, 0.0]], dtype))  # (u0, u1) -> (u0, u0)
        # sign(cos 2t + nudge): never 0, and wrong only where |cos 2t| < nudge, where either
        # half-angle is stable (|cos 2t +- 1| > 1 - nudge) and zeroes a_pq
        self.nudge = ctx.const(np.tile(np.asarray([2.0 ** -20, 2.0 ** -20], dtype), half_pairs))
        self.unit = ctx.const(np.tile(np.asarray([1.0, 0.0], dtype), half_pairs))
        lead = [0] * (rank - 2)
        self.row_shape = ctx.i64([*lead, 1, n_even])  # the pairs' (c, s), flattened
        self.flat_shape = ctx.i64([*lead, 1, n_even * n_even])
        self.zeros = mx.expand_to(ctx, ctx.const(np.zeros((n_even, n_even), dtype)), [*batch, n_even, n_even])
        half = n_even // 2
        kk = np.stack([2 * np.arange(half), 2 * np.arange(half) + 1, 2 * np.arange(half)], axis=-1)  # [N/2, 3]
        ll = np.stack([2 * np.arange(half), 2 * np.arange(half) + 1, 2 * np.arange(half) + 1], axis=-1)
        # Everything is indexed as flat rows [..., 1, L] and read by GatherElements (onnxruntime's
        # GatherND and Gather copy element by element: 1536 values cost them 11 and 5 us, it 1.3).
        # Per round j of a block, the transform so far has width w = 2^j (columns cols [N, w]); the
        # tables reading that round's (a_pp, a_qq, a_pq) and extending the transform by the round.
        self.read, self.extend, self.columns, self.widths, self.triple_shape, self.diff = [], [], [], [], [], []
        cols = np.arange(n_even, dtype=np.int64)[:, None]
        for j in range(block):
            w = cols.shape[1]
            ck = cols[kk][:, :, :, None]  # [N/2, 3, w, 1]: the columns of row k's transform
            cl = cols[ll][:, :, None, :]  # [N/2, 3, 1, w]
            h_idx = ck * n_even + cl  # (T h T^T)[k, l] = sum_uv T[k, u] T[l, v] h[cols[k, u], cols[l, v]]
            u = np.arange(w)
            wk = np.broadcast_to(kk[:, :, None, None] * w + u[:, None], (half, 3, w, w))  # T[k, u], flattened T
            wl = np.broadcast_to(ll[:, :, None, None] * w + u[None, :], (half, 3, w, w))
            self.read.append((self._row_index(ctx, h_idx), self._row_index(ctx, wk) if j else None,
                              self._row_index(ctx, wl) if j else None))
            self.triple_shape.append(ctx.i64([*lead, half, 3 * w * w]))
            # the sum over (u, v) and (a_pp, a_qq, a_pq) -> (a_qq - a_pp, 2 a_pq) in one MatMul
            diff = np.asarray([[-1.0, 0.0], [1.0, 0.0], [0.0, 2.0]])
            self.diff.append(ctx.const(np.repeat(diff, w * w, axis=0).astype(dtype)))
            # row k of the extended transform: coefficient a of row k of this round times row
            # gather[k, a] of the transform so far; flattened (k, a, u)
            ka = np.broadcast_to(2 * np.arange(n_even)[:, None, None] + np.arange(2)[None, :, None], (n_even, 2, w))
            wa = gather[:, :, None] * w + u[None, None, :]
            self.extend.append((self._row_index(ctx, ka), self._row_index(ctx, wa)) if j else None)
            cols = cols[gather].reshape(n_even, 2 * w)
            self.columns.append(mx.expand_to(ctx, ctx.const(cols), [*batch, n_even, 2 * w]))
            self.widths.append(2 * w)

    def _row_index(self, ctx, idx):
        """A GatherElements index over a flat row ``[..., 1, L]``: ``[*batch, 1, idx.size]``."""
        c = ctx.const(np.ascontiguousarray(idx, dtype=np.int64).reshape(1, -1))
        return mx.expand_to(ctx, c, [*self.batch, 1, idx.size]) if self.batch else c

    def rotations(self, sub, y):
        """``(c, s)`` [..., N/2, 2] of each pair from ``y = (d, e)`` [..., N/2, 2] of its 2x2 problem
        ``[[a_pp, a_pq], [a_pq, a_qq]]``: ``d = a_qq - a_pp``, ``e = 2 a_pq``.

        ``(d, e) / hypot(d, e)`` is ``(cos 2t, sin 2t)`` of the rotation angle t that zeroes
        ``a_pq``, and ``(cos 2t + 1, sin 2t)`` normalised is ``(cos t, sin t)`` (half-angle). Taking
        ``sign(cos 2t) * (cos 2t, sin 2t)`` instead, i.e. ``(|cos 2t| + 1, sign(cos 2t) sin 2t)``,
        takes the other solution when ``d < 0``: the smaller angle (``|t| <= pi/4``, Rutishauser's
        ``t = sign(d) e / (|d| + hypot(d, e))``), with ``c > 0`` (of ``J`` and ``-J``, which both
        rotate, the one that is the identity when there is nothing to rotate), and no cancellation
        (the first component is at least ``1 - nudge``). ``e = 0`` gives ``(1, 0)``: exactly the
        identity, so a diagonal (or padded 1x1) matrix keeps ``V = I`` with LAPACK's signs (an
        earlier ``(-1, 0)`` for ``d < 0`` returned a 1x1 eigh's eigenvector as ``-1``). Nodes:
        LpNormalization, MatMul + Add (a Gemm), Sign, Mul, Add, LpNormalization (the offset ``y``
        carries keeps it nonzero: ``d = e = 0`` is the identity too). The operands are scaled to
        ``max |a| = 1`` beforehand, so the norms neither overflow nor underflow and the offset is
        far below the rounding of any entry that matters."""
        op = sub.op
        u = op.LpNormalization(y, axis=-1, p=2)  # (cos 2t, sin 2t)
        # (sign(d), sign(d)) by Sign rather than Less + Where: 6% faster for the whole eigh at 64 (an
        # elementwise Where against broadcast constants is one of the body's slowest small nodes)
        sign = op.Sign(op.Add(op.MatMul(u, self.first), self.nudge))  # (u0 + nudge, u0 + nudge): one Gemm
        return op.LpNormalization(op.Add(op.Mul(u, sign), self.unit), axis=-1, p=2)

    def block(self, sub, h, rounds):
        """The transform ``T`` [..., N, N] of the next ``rounds`` (<= the block size) rounds for the
        symmetric ``h`` [..., N, N] whose 2x2 problems drive them: ``T h T^T`` is ``h`` after
        those rounds, and ``T X`` rotates (and moves) the rows of any X along with it."""
        op = sub.op
        h_flat = op.Reshape(h, self.flat_shape)
        t = None  # the transform so far, flattened [..., 1, N * w]
        for j in range(rounds):
            h_idx, wk, wl = self.read[j]
            terms = op.GatherElements(h_flat, h_idx, axis=-1)
            if t is not None:
                terms = op.Mul(op.Mul(op.GatherElements(t, wk, axis=-1), op.GatherElements(t, wl, axis=-1)), terms)
            y = op.Add(op.MatMul(op.Reshape(terms, self.triple_shape[j]), self.diff[j]), self.tiny)  # (d, e)
            coef = op.MatMul(op.Reshape(self.rotations(sub, y), self.row_shape), self.sel_t)  # [..., 1, 2N]
            if t is None:
                t = coef
            else:
                ka, wa = self.extend[j]
                t = op.Mul(op.GatherElements(coef, ka, axis=-1), op.GatherElements(t, wa, axis=-1))
        t = op.Reshape(t, sub.i64([0] * (self.rank - 2) + [self.n, self.widths[rounds - 1]]))
        # columns repeat within a row from three rounds on (the circle brings an index back to a
        # row it already reached): their coefficients add up
        return op.ScatterElements(self.zeros, self.columns[rounds - 1], t, axis=-1,
                                  **({"reduction": "add"} if rounds >= 3 else {}))


#: The offset keeping a pair's vector nonzero (:meth:`_Rounds.rotations`): its square is a
#: normal number, and it is far below eps on operands scaled to ``max |a| = 1``.
_TINY = {np.dtype(np.float32): 2.0 ** -60, np.dtype(np.float64): 2.0 ** -500}

#: Rounds per sweep up to this are unrolled inside the sweep's Loop body, beyond that the rounds
#: are an inner Loop (every block of rounds is the same computation, see :func:`_schedule`).
_UNROLL_ROUNDS = 15

#: Rounds a transform combines (:class:`_Rounds`); the sweep's rounds left over form a last,
#: shorter block.
_BLOCK_ROUNDS = 3


#: Up to this (even) size the rounds are dense transforms of three rounds (:class:`_Rounds`), O(N^3)
#: a block; beyond, rows rotated in place, O(N^2) a round (:mod:`._jacobi_rows`). Measured, float32,
#: one thread, dense against rows: 64: eigh 5.6 / 10.2 ms, 128: 38 / 43 ms, 256: 410 / 288 ms.
_DENSE_MAX = 128


def _sweeps(ctx, state, make_block, rows_round, converged_fn, n_even, dtype, name):
    """Loop of sweeps (each ``n_even - 1`` rounds) until ``converged_fn``. Up to :data:`_DENSE_MAX`,
    ``make_block(rounds) -> block_fn`` with ``block_fn(sub, count, *state) -> new state`` applying
    ``count`` rounds as one transform (blocks unrolled or an inner Loop); beyond,
    ``rows_round(sub, rnd, *state)`` one round of :mod:`._jacobi_rows`."""
    max_sweeps = _MAX_SWEEPS.get(np.dtype(dtype), 20)
    if n_even > _DENSE_MAX:
        return row_jacobi.sweeps(ctx, state, rows_round, converged_fn, n_even, dtype, name, max_sweeps)
    rounds = n_even - 1
    # three rounds repeat columns in a row, which their ScatterElements adds up (reduction="add",
    # opset 16; legalized before into a Loop of single updates); without it, blocks of two
    # (distinct columns)
    size = min(_BLOCK_ROUNDS if ctx.has_op("ScatterElements", reduction="add") else 2, rounds)
    full, rest = divmod(rounds, size)
    block_fn = make_block(_Rounds(ctx, n_even, len(state[0][1].shape), dtype, state[0][1].shape[:-2], size))

    def sweep(sub, _k, *st):
        if rounds <= _UNROLL_ROUNDS:
            for _ in range(full):
                st = block_fn(sub, size, *st)
        else:
            st = mx.loop(sub, full, [(v, a) for v, (_, a) in zip(st, state, strict=True)],
                         lambda inner, _r, *st_: block_fn(inner, size, *st_), f"{name}_round")
        return block_fn(sub, rest, *st) if rest else st

    return mx.loop(ctx, max_sweeps, state, sweep, f"{name}_sweep", until=converged_fn)


def _scale_of(ctx, x, dtype):
    """``max |x|`` per matrix [..., 1, 1] (the smallest normal number for a zero matrix)."""
    op = ctx.op
    smallest = ctx.const(np.asarray(np.finfo(dtype).tiny, dtype))
    return op.Max(op.ReduceMax(op.Abs(x), ctx.i64([-2, -1]), keepdims=1), smallest)


def _scaled(ctx, x, dtype):
    """``x / max |x|`` per matrix: keeps the rotations' norms and the convergence tests' sums of
    squares in range (a 64x64 float32 eigh of entries ~1e30 or ~1e-30 ran to the sweep cap)."""
    return ctx.op.Div(x, _scale_of(ctx, x, dtype))


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
    if n == 1:  # nothing to rotate: the eigenvector is 1, as LAPACK's
        w = ctx.op.ReduceSum(sym, ctx.i64([-1]), keepdims=0)
        return [mx.expand_to(ctx, ctx.const(np.eye(n, dtype=dtype)), [*batch, n, n]), w]
    op = ctx.op
    n_even = n + n % 2
    work = _pad_square(ctx, _scaled(ctx, sym, dtype), rank, n_even - n, n_even - n)
    v0 = mx.expand_to(ctx, ctx.const(np.eye(n_even, dtype=dtype)), [*batch, n_even, n_even])
    work_aval = mx.aval([*batch, n_even, n_even], dtype)
    eye_mask = np.eye(n_even, dtype=bool)
    fro2 = op.ReduceSum(op.Mul(work, work), ctx.i64([-2, -1]), keepdims=0)
    # Rounding keeps the off-diagonal norm at a floor of ~1-3 eps ||A|| (measured, n = 16..64), so a
    # bound of eps ||A|| is never met and every matrix ran to the sweep cap; sqrt(n) eps ||A|| lies
    # above the floor and one sweep below the last quadratic step (64x64: 7 sweeps instead of 15).
    tol2 = op.Mul(fro2, float(np.sqrt(n_even) * np.finfo(dtype).eps) ** 2)
    def make_block(rounds):
        def block_fn(sub, count, w_, vt):
            o = sub.op
            t = rounds.block(sub, w_, count)
            # A <- T A T^T, V^T <- T V^T (V <- V T^T)
            return [o.MatMul(o.MatMul(t, w_), mx.swap_last_axes(sub, t, rank)), o.MatMul(t, vt)]

        return block_fn

    def converged(sub, w_, _vt):
        o = sub.op
        off = o.Where(sub.const(eye_mask), 0.0, w_)
        off2 = o.ReduceSum(o.Mul(off, off), sub.i64([-2, -1]), keepdims=0)
        not_done = o.Greater(off2, tol2)
        return o.Not(o.Cast(o.ReduceMax(o.Cast(not_done, to=6), keepdims=0), to=9))

    _, vt = _sweeps(ctx, [(work, work_aval), (v0, work_aval)], make_block, row_jacobi.eigh_round(rank, n_even),
                    converged, n_even, dtype, "jacobi")
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


def _vector_sign(ctx, x, wide, batch, dtype):
    """``V`` [..., 1, 1] of a single column ``x`` [..., rows, 1] (``A`` or, when ``wide``, ``A^T``),
    with LAPACK's sign (gesdd factors a vector by a Householder QR, or LQ, first, and takes the 1x1
    factor's singular vectors as ``(sign(r), 1)``): a column ``A`` [m, 1] gets ``vt = 1`` and
    ``u = A / |A|``; a row ``A`` [1, n] (n >= 2) ``u = -sign(a_0)`` (``sign(0) = 1``, the reflector's
    ``beta = -sign(a_0) |a|``) and ``vt = u A / |A|``, or ``u = 1`` when ``A`` is zero."""
    if not wide:
        return mx.expand_to(ctx, ctx.const(np.ones((1, 1), dtype)), [*batch, 1, 1])
    op = ctx.op
    first = op.Slice(x, ctx.i64([0]), ctx.i64([1]), ctx.i64([-2]))  # a_0, [..., 1, 1]
    nonzero = op.Greater(op.ReduceMax(op.Abs(x), ctx.i64([-2]), keepdims=1), 0.0)
    return op.Where(op.And(nonzero, op.GreaterOrEqual(first, 0.0)), ctx.const(np.asarray(-1.0, dtype)),
                    ctx.const(np.asarray(1.0, dtype)))


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
    # everything below on x / max |x| (the singular values are scaled back at the end): the
    # column norms are sums of squares, which overflow (or underflow) in float32 for entries
    # beyond ~1e19 (below ~1e-19)
    scale = _scale_of(ctx, x, dtype)
    x = ctx.op.Div(x, scale)
    n_even = cols + cols % 2
    eps = float(np.finfo(dtype).eps)
    eye_mask = np.eye(n_even, dtype=bool)
    if cols == 1:
        v = _vector_sign(ctx, x, wide, batch, dtype)
    else:
        gt0 = mx.swap_last_axes(ctx, _pad_square(ctx, x, rank, 0, n_even - cols), rank)
        v0 = mx.expand_to(ctx, ctx.const(np.eye(n_even, dtype=dtype)), [*batch, n_even, n_even])
        g_aval = mx.aval([*batch, n_even, rows], dtype)
        v_aval = mx.aval([*batch, n_even, n_even], dtype)
        def make_block(rounds):
            def block_fn(sub, count, gt, vt):  # G^T and V^T: their rows rotate, G <- G T^T, V <- V T^T
                o = sub.op
                # the block's rotations are read off the columns' Gram matrix, computed afresh from
                # the rotated columns each block (one-sided Jacobi: never the Gram matrix of the input)
                t = rounds.block(sub, o.MatMul(gt, mx.swap_last_axes(sub, gt, rank)), count)
                return [o.MatMul(t, gt), o.MatMul(t, vt)]

            return block_fn

        def converged(sub, gt, _vt):
            """Every column pair orthogonal to ``eps``: ``|g_p . g_q| <= eps * |g_p| |g_q|``."""
            o = sub.op
            gram = o.MatMul(gt, mx.swap_last_axes(sub, gt, rank))
            d = o.ReduceSum(o.Where(sub.const(eye_mask), gram, 0.0), sub.i64([-1]), keepdims=0)
            scale = o.Mul(o.Unsqueeze(d, sub.i64([-1])), o.Unsqueeze(d, sub.i64([-2])))
            off = o.Where(sub.const(eye_mask), 0.0, gram)
            bad = o.Greater(o.Mul(off, off), o.Mul(scale, (eps * rows) ** 2))
            return o.Not(o.Cast(o.ReduceMax(o.Cast(bad, to=6), keepdims=0), to=9))

        _, vt = _sweeps(ctx, [(gt0, g_aval), (v0, v_aval)], make_block, row_jacobi.svd_round, converged, n_even, dtype,
                        "svd_jacobi")
        v = mx.swap_last_axes(ctx, vt, rank)
    op = ctx.op
    if cols > 1 and n_even != cols:
        v = op.Slice(v, ctx.i64([0, 0]), ctx.i64([cols, cols]), ctx.i64([-2, -1]))
    # polish: V re-orthonormalised and the columns recomputed from the input (the rotated columns
    # carry the rounding of every round), so u s v^T reproduces A to a few eps
    v = _orthonormalize(ctx, v, rank, cols)
    g = op.MatMul(x, v)
    s = op.Sqrt(op.ReduceSum(op.Mul(g, g), ctx.i64([-2]), keepdims=0))  # [..., cols]
    scale = op.Squeeze(scale, ctx.i64([-1]))  # [..., 1]: the singular values of the input
    if not p["compute_uv"]:
        s, _, _ = _sort_columns(ctx, s, None, largest=True, n=cols)
        return [op.Mul(s, scale)]
    s, v, idx = _sort_columns(ctx, s, v, largest=True, n=cols)
    idx_g = op.Expand(op.Unsqueeze(idx, ctx.i64([-2])), op.Shape(g))
    g = op.GatherElements(g, idx_g, axis=-1)
    s_row = op.Unsqueeze(s, ctx.i64([-2]))
    positive = op.Greater(s_row, 0.0)
    # a zero singular value's u column: 0, except for a single column, whose LAPACK value is e_0
    # (the QR of a zero column is the identity)
    fill = ctx.const(np.eye(rows, 1, dtype=dtype)) if cols == 1 else 0.0
    u = op.Where(positive, op.Div(g, op.Where(positive, s_row, 1.0)), fill)  # [..., rows, cols]
    if p["full_matrices"] and rows > cols:
        u_aval = mx.aval([*batch, rows, cols], dtype)
        r, taus = _geqrf(ctx, u, u_aval)
        q = _householder_product(ctx, r, taus, u_aval, rows)  # [..., rows, rows], q[:, :cols] = +-u
        q_thin = op.Slice(q, ctx.i64([0]), ctx.i64([cols]), ctx.i64([-1]))
        q_rest = op.Slice(q, ctx.i64([cols]), ctx.i64([rows]), ctx.i64([-1]))
        u = op.Concat(op.Where(positive, u, q_thin), q_rest, axis=-1)
    s = op.Mul(s, scale)
    if wide:  # a^T = u s v^T  =>  a = v s u^T
        return [s, v, mx.swap_last_axes(ctx, u, rank)]
    return [s, u, mx.swap_last_axes(ctx, v, rank)]

"""``cholesky`` under ``target="onnxruntime"``: recursive halving with onnxruntime's batched
``com.microsoft.Inverse``, O(log n) levels of batched MatMuls instead of ~6 nodes per column.

The standard-ONNX lowering (:func:`jax2onnx_lax.linalg_factor._cholesky_blocked`) is bound by
onnxruntime's per-node cost (~0.7-1 us a node whatever it computes at these sizes): n = 64 is
~400 nodes, 0.26 ms against JAX-jit's 0.012 ms. Here the matrix is padded to a power of two
``N`` with an identity block (still SPD; the factor's leading ``n x n`` block is the factor of
the input) and halved ``log2 N`` times (above :data:`PANEL`, after a few panel steps: below). A
level holds ``B`` SPD blocks of size ``h``, ``[..., B, h, h]``; each is split into quarters and
eliminated as one block LDL^T step,

    Lt21 = A21 inv(A11);   S = A22 - Lt21 A12,

where ``inv(A11)`` is one ``Inverse`` node for all ``B`` blocks. The next level's batch is
``A11`` and ``S`` of each block, in that order (``[..., 2B, h/2, h/2]``: block ``i`` still covers
rows/columns ``i h/2 ...``). The 2 x 2 blocks left after ``log2 N - 1`` levels are factored in
closed form (:func:`_factor_2x2`), and the factor is assembled bottom-up: a block's factor is
``[[L1, 0], [Lt21 L1, L2]]`` from its two halves' factors. About 15 nodes a level (nine down, six
up): 95 for n = 64 (the standard lowering: 403).

A large leading block makes the first Inverse the dominant cost (Eigen's inverse is ~10x slower
per flop than a MatMul): above :data:`PANEL` the matrix is first reduced by right-looking block
LDL^T steps of ``PANEL`` columns (one small Inverse each, ``Lt_j = T21 inv(D_j)``,
``T <- T22 - Lt_j T12``), and the halving then factors the ``N / PANEL`` pivot blocks ``D_j`` as one
batch; panel j of L is ``[0; L_j; Lt_j L_j]``. n = 256: 155 nodes (the standard lowering: 1597).

Why float64 inside (the input is Cast once in, the factor once out): the block elimination goes
through explicit inverses, whose error grows with the condition number of the diagonal blocks.
This algorithm with float32 arithmetic inside measured 2-540x JAX's residual
``||L L^T - A|| / ||A||`` on ill-conditioned SPD input (n = 64, cond 1e4: 2.2e-6 against 6.0e-8;
cond 1e6: 3.5e-5 against 6.5e-8; bench/cholesky_halving_precision.py). In float64 the inverse's
error (~cond * 1e-16) lies far below float32 rounding, and the float32 result is the rounded
float64 factor: residuals at or below JAX's float32 potrf (2.8e-8 against 6.0e-8 / 1.5e-7 at cond
1e4, n = 64 / 256) and a forward error of float32's rounding (bench/results/linalg.md). So
the form takes float32 and float16 input when onnxruntime's Inverse has a float64 kernel (the
kernel table); float64 input keeps the standard lowering (a float64 factor by explicit inverses
would lose the digits float64 users ask for), as does every other target.

potrf's failure convention, as the standard lowering: a pivot that is not positive (or NaN)
makes the whole factor NaN, and so does any inf/NaN in the assembled factor (a singular leading
block ``A11`` -- the matrix is then not positive definite -- makes Inverse return inf/NaN, which
the products spread). A NaN entry in the input makes the factor NaN throughout too, where LAPACK's
potrf (not stopping at a NaN pivot) leaves JAX's leading columns finite. Zeros above the diagonal
are exact (padding and concatenation, never arithmetic); only the lower triangle of the input is
read, as potrf does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from . import _matrix as mx

#: the kernel table's name of onnxruntime's batched matrix inverse (jax2onnx.ir.runtime)
INVERSE = "com.microsoft.Inverse"

#: Above this size the top is a right-looking block LDL^T in panels of ``PANEL`` columns (one
#: Inverse of the ``PANEL x PANEL`` pivot block a step), and the halving factors the pivot blocks,
#: all at once. onnxruntime's Inverse (Eigen's LU inverse) runs at ~10 GFLOP/s in float64 where
#: its MatMul (MLAS) runs at ~100: one 128 x 128 Inverse takes 0.38 ms, 0.09 ms for two 64 x 64,
#: so a pure halving of n = 256 spends half its time in its first Inverse. Measured at n = 256
#: (float32 input, one thread, load ~3, before the 2 x 2 leaves): halving only 1.2 ms (134 nodes); 64: 1.1 ms,
#: 32 0.7-0.87 ms (164 nodes), 16 0.7-0.74 ms (229), 8 0.9 ms (374); n = 64 is ~0.1 ms for 16-64.
PANEL = 32

#: input dtypes this form takes (it computes in float64 and rounds once at the end)
_INPUT_DTYPES = (np.dtype(np.float32), np.dtype(np.float16))


def applies(ctx: Any) -> bool:
    """Whether this export's cholesky takes the Inverse form: a target that runs onnxruntime's
    contrib ops (``target="onnxruntime"``), a float32/float16 operand, and a float64 Inverse kernel
    in the target's onnxruntime."""
    if not ctx.target.allows("Inverse", "com.microsoft"):
        return False
    if np.dtype(ctx.avals_in[0].dtype) not in _INPUT_DTYPES:
        return False
    return np.dtype(np.float64) in ctx.kernel_dtypes(INVERSE)


def _f64(ctx: Any, value: Any) -> ir.Value:
    return ctx.const(np.asarray(value, dtype=np.float64))


def cholesky_by_halving(ctx: Any, a: ir.Value, n: int, rank: int) -> ir.Value:
    """The lower Cholesky factor of ``a`` ``[..., n, n]`` (``n`` static, batch dims any), by
    recursive halving in float64 (module docstring)."""
    op = ctx.op
    out_dtype = np.dtype(ctx.avals_in[0].dtype)
    nb = rank - 2  # batch dims: kept by Reshape's 0 entries, so they may be symbolic
    keep = [0] * nb
    size = 1 << (n - 1).bit_length()  # N: n padded up to a power of two

    # potrf reads the lower triangle only: mirror it, unless the operand is symmetric already
    x = a if _symmetrized(a, rank) else \
        op.Where(ctx.const(np.tril(np.ones((n, n), dtype=bool))), a, mx.swap_last_axes(ctx, a, rank))
    x = ctx.cast(x, np.float64)
    if size > n:  # [[A, 0], [0, I]]: SPD iff A is, and its factor's leading block is A's factor
        pads = [0] * (2 * rank)
        pads[2 * rank - 2] = pads[2 * rank - 1] = size - n  # after the last two axes
        x = op.Add(op.Pad(x, ctx.i64(pads)), _f64(ctx, np.diag((np.arange(size) >= n).astype(np.float64))))

    block = min(size, PANEL)
    panels = size // block
    if panels == 1:
        l_ = _halving(ctx, x, size, 1, keep)  # [..., N, N]
    else:
        pivots, lts = _panel_steps(ctx, x, size, block)
        stacked = op.Reshape(op.Concat(*pivots, axis=-2), ctx.i64([*keep, panels, block, block]))
        l_ = _assemble_panels(ctx, _halving(ctx, stacked, block, panels, keep), lts, size, block, keep)

    # one failed pivot, or an inf/NaN from the inverse of a singular block, turns the whole factor
    # NaN (JAX's convention): 0 * x is NaN exactly for a non-finite x, and adding 0 is exact
    failed = op.ReduceSum(op.Mul(l_, _f64(ctx, 0.0)), ctx.i64([-2, -1]), keepdims=1)
    l_ = op.Add(l_, failed)
    if size > n:
        l_ = op.Slice(l_, ctx.i64([0, 0]), ctx.i64([n, n]), ctx.i64([-2, -1]))
    return ctx.cast(l_, out_dtype)


def _symmetrized(a: ir.Value, rank: int) -> bool:
    """Whether ``a`` is ``(x + x^T) / 2`` as ``lax.linalg.cholesky``'s ``symmetrize_input`` (so
    ``jnp.linalg.cholesky`` and ``cho_factor``) writes it: then it is exactly symmetric (``x_ij +
    x_ji`` is ``x_ji + x_ij`` bit for bit), and mirroring its lower triangle (a Transpose and a
    Where: 0.08 ms of 0.7 at n = 256) would change nothing."""
    div = a.producer()
    if div is None or div.op_type != "Div" or div.domain not in ("", "ai.onnx"):
        return False
    two = div.inputs[1].const_value
    if two is None or two.numpy().size != 1 or float(two.numpy().reshape(())) != 2.0:
        return False
    add = div.inputs[0].producer()
    if add is None or add.op_type != "Add" or add.domain not in ("", "ai.onnx"):
        return False
    swap = [*range(rank - 2), rank - 1, rank - 2]
    for x, y in (tuple(add.inputs), tuple(add.inputs)[::-1]):
        transpose = y.producer() if y is not None else None
        if transpose is not None and transpose.op_type == "Transpose" and transpose.inputs[0] is x and x is not None:
            perm = transpose.attributes.get("perm")
            if perm is not None and list(perm.as_ints()) == swap:
                return True
    return False


def _panel_steps(ctx: Any, x: ir.Value, size: int, block: int) -> tuple[list[ir.Value], list[ir.Value]]:
    """Right-looking block LDL^T of ``x`` ``[..., N, N]`` in panels of ``block`` columns: step j
    inverts the trailing block's leading ``block x block`` pivot block ``D_j`` (one Inverse),
    takes ``Lt_j = T21 inv(D_j)`` and leaves ``T22 - Lt_j T12``. Returns the pivot blocks (their
    factors make the block diagonal of L) and the ``Lt_j`` (``[..., N - (j + 1) block, block]``)."""
    pivots, lts = [], []
    t = x
    for start in range(0, size - block, block):
        rest = size - start - block
        d, lt, t = _eliminate(ctx, t, block, rest)
        pivots.append(d)
        lts.append(lt)
    pivots.append(t)
    return pivots, lts


def _eliminate(ctx: Any, x: ir.Value, lead: int, rest: int) -> tuple[ir.Value, ir.Value, ir.Value]:
    """One block step of LDL^T on ``x`` (``[..., lead + rest, lead + rest]``): its leading block
    ``A11``, the unit-lower factor ``Lt21 = A21 inv(A11)`` (one Inverse) and the Schur complement
    ``A22 - Lt21 A12``."""
    op = ctx.op
    split = ctx.i64([lead, rest])
    top, bottom = op.Split(x, split, axis=-2, _outputs=2)
    a11, a12 = op.Split(top, split, axis=-1, _outputs=2)
    a21, a22 = op.Split(bottom, split, axis=-1, _outputs=2)
    lt21 = op.MatMul(a21, _inverse(ctx, a11))
    return a11, lt21, op.Sub(a22, op.MatMul(lt21, a12))


def _halving(ctx: Any, x: ir.Value, h: int, blocks: int, keep: list[int]) -> ir.Value:
    """The lower factors of the ``blocks`` SPD blocks ``x`` (``[..., blocks, h, h]``, or
    ``[..., h, h]`` when ``blocks`` is 1), same shape, by recursive halving (module docstring)."""
    op = ctx.op
    top_blocks, size = blocks, h
    # down: halve every block, keep the unit-lower factors Lt21 of each level
    factors = []
    while h > 2:
        half = h // 2
        a11, lt21, schur = _eliminate(ctx, x, half, half)
        factors.append(lt21)
        # [A11; S] as rows is [..., B, 2 * half, half]: the same memory as [..., 2B, half, half]
        blocks *= 2
        x = op.Reshape(op.Concat(a11, schur, axis=-2), ctx.i64([*keep, blocks, half, half]))
        h = half
    single = [] if blocks == 1 and top_blocks == 1 else [blocks]  # a single top block has no block axis
    if h == 1:  # a 1 x 1 matrix: its pivot
        l_ = _sqrt_pivots(ctx, x)
    else:
        l_ = _factor_2x2(ctx, x, [*keep, *single])
        if not factors:  # no level above to reshape it
            l_ = op.Reshape(l_, ctx.i64([*keep, *single, 2, 2]))

    # up: a block's factor is [[L1, 0], [Lt21 L1, L2]] from its halves' factors
    for level, lt21 in reversed(list(enumerate(factors))):
        half = size >> (level + 1)
        blocks //= 2
        # [L1; L2] of each block; the top level of a single block has no block axis
        stacked = [*keep, 2 * half, half] if blocks == 1 and top_blocks == 1 else [*keep, blocks, 2 * half, half]
        l1, l2 = op.Split(op.Reshape(l_, ctx.i64(stacked)), ctx.i64([half, half]), axis=-2, _outputs=2)
        right_pad = [0] * (2 * len(stacked))
        right_pad[2 * len(stacked) - 1] = half
        top = op.Pad(l1, ctx.i64(right_pad))
        bottom = op.Concat(op.MatMul(lt21, l1), l2, axis=-1)
        l_ = op.Concat(top, bottom, axis=-2)
    return l_


def _sqrt_pivots(ctx: Any, d: ir.Value) -> ir.Value:
    """``sqrt(d)`` where ``d > 0``, NaN otherwise (Greater is False for NaN): a zero pivot fails
    potrf, and its square root 0 would not show as non-finite."""
    op = ctx.op
    return op.Sqrt(op.Where(op.Greater(d, _f64(ctx, 0.0)), d, _f64(ctx, np.nan)))


def _factor_2x2(ctx: Any, x: ir.Value, lead: list[int]) -> ir.Value:
    """The factors of 2 x 2 SPD blocks ``x`` ``[*lead, 2, 2]`` in closed form, ``[[sqrt(a), 0],
    [c / sqrt(a), sqrt(d - c^2 / a)]]``: 11 nodes where one more halving level (9 down, 6 up) and
    the 1 x 1 pivots (3) take 18. Returned flat, ``[*lead, 4]`` (row-major: the level above
    reshapes it anyway). A first pivot ``a <= 0`` needs no
    check: its square root is NaN, or 0 and then ``c / 0`` is inf/NaN, which the final check sees;
    the second pivot is checked as the 1 x 1 ones are."""
    op = ctx.op
    a, _, c, d = op.Split(op.Reshape(x, ctx.i64([*lead, 4])), ctx.i64([1, 1, 1, 1]), axis=-1, _outputs=4)
    l11 = op.Sqrt(a)
    l21 = op.Div(c, l11)
    l22 = _sqrt_pivots(ctx, op.Sub(d, op.Mul(l21, l21)))
    return op.Concat(l11, op.Mul(l11, _f64(ctx, 0.0)), l21, l22, axis=-1)  # l11 * 0: exact 0 unless it failed


def _assemble_panels(ctx: Any, factors: ir.Value, lts: list[ir.Value], size: int, block: int,
                     keep: list[int]) -> ir.Value:
    """L from the pivot blocks' factors ``[..., panels, block, block]`` and the panels' ``Lt_j``:
    panel j of L is ``[0; L_j; Lt_j L_j]`` (``A = Lt D Lt^T`` with D's blocks ``L_j L_j^T``)."""
    op = ctx.op
    panels = size // block
    rank = len(keep) + 2
    l_blocks = op.Split(op.Reshape(factors, ctx.i64([*keep, size, block])), ctx.i64([block] * panels), axis=-2,
                        _outputs=panels)
    columns = []
    for j, l_j in enumerate(l_blocks):
        col = op.Concat(l_j, op.MatMul(lts[j], l_j), axis=-2) if j < panels - 1 else l_j
        if j:
            pads = [0] * (2 * rank)
            pads[rank - 2] = j * block  # zero rows above the diagonal block
            col = op.Pad(col, ctx.i64(pads))
        columns.append(col)
    return op.Concat(*columns, axis=-1)


def _inverse(ctx: Any, a: ir.Value) -> ir.Value:
    out = ctx.op.Inverse(a, _domain="com.microsoft")
    out.type = ir.TensorType(ir.DataType.DOUBLE)  # no ONNX schema types a contrib op
    return out

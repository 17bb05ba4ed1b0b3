"""lax.linalg solves: ``triangular_solve`` (every flag) and ``tridiagonal_solve``, each an ONNX ``Loop``
over the rows, and ``custom_linear_solve`` (what ``jnp.linalg.solve`` wraps its LU solve in).

``triangular_solve`` reduces every flag combination to one forward or backward substitution
``T X = B``: ``transpose_a`` and a right-side solve (``X op(a) = b`` is ``op(a)^T X^T = b^T``)
each transpose the triangle, flipping lower/upper; only the named triangle of ``a`` is read (the
other may hold anything, as in ``cho_solve``'s packed factor) and ``unit_diagonal`` ignores the
diagonal. ``conjugate_a`` is a no-op for the real dtypes supported here.

``tridiagonal_solve`` is the Thomas algorithm (forward elimination, back substitution) without
pivoting. LAPACK's gtsv, which JAX calls on CPU, pivots; on diagonally dominant or symmetric
positive definite systems (the discretised diffusion/heat operators this is used for) the two agree
to rounding, but a system that needs pivoting (a zero on the eliminated diagonal) gives inf/NaN
here where gtsv succeeds.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.plugin import Lowerings

from . import _matrix as mx
from ._substitution import substitute_unrolled
from .linalg_factor import UNROLL_MAX

lowerings = Lowerings()


@lowerings.register("triangular_solve")
def lower_triangular_solve(ctx, a, b):
    mx.require_real(ctx)
    p = ctx.params
    a_aval, b_aval = ctx.avals_in
    m, _ = mx.static_matrix_dims(ctx, a_aval, "a")
    mx.static_matrix_dims(ctx, b_aval, "b")
    rank = len(b_aval.shape)
    left = bool(p["left_side"])
    transposed = bool(p["transpose_a"]) != (not left)
    lower = bool(p["lower"]) != transposed
    unit = bool(p["unit_diagonal"])
    t = mx.swap_last_axes(ctx, a, rank) if transposed else a
    rhs = b if left else mx.swap_last_axes(ctx, b, rank)
    if m <= UNROLL_MAX:
        x = substitute_unrolled(ctx, t, rhs, m, lower, unit)
        return x if left else mx.swap_last_axes(ctx, x, rank)
    strict = np.tril(np.ones((m, m), dtype=bool), -1) if lower else np.triu(np.ones((m, m), dtype=bool), 1)
    t_off = ctx.op.Where(ctx.const(strict), t, 0.0)
    diag = None if unit else ctx.op.ReduceSum(ctx.op.Where(ctx.const(np.eye(m, dtype=bool)), t, 0.0),
                                              ctx.i64([-1]), keepdims=1)  # [..., m, 1]
    rhs_shape = list(b_aval.shape) if left else [*b_aval.shape[:-2], b_aval.shape[-1], b_aval.shape[-2]]
    rhs_aval = mx.aval(rhs_shape, b_aval.dtype)
    x0 = ctx.op.Where(ctx.const(np.zeros((1,) * rank, dtype=bool)), rhs, 0.0)

    def step(sub, it, x):
        op = sub.op
        i = it if lower else op.Sub(sub.i64(m - 1), it)
        i1 = mx.index1(sub, i)
        at_i = op.Equal(mx.iota(sub, m, [m, 1]), i)
        s = op.MatMul(mx.take(sub, t_off, i1, -2), x)  # the solved rows' contribution, [..., 1, n]
        row = op.Sub(mx.take(sub, rhs, i1, -2), s)
        if diag is not None:
            row = op.Div(row, mx.take(sub, diag, i1, -2))
        return [op.Where(at_i, row, x)]

    (x,) = mx.loop(ctx, m, [(x0, rhs_aval)], step, "trsm_row")
    return x if left else mx.swap_last_axes(ctx, x, rank)


@lowerings.register("tridiagonal_solve")
def lower_tridiagonal_solve(ctx, dl, d, du, b):
    mx.require_real(ctx)
    b_aval = ctx.avals_in[3]
    m, _ = mx.static_matrix_dims(ctx, b_aval, "b")
    rank = len(b_aval.shape)
    op = ctx.op
    rows = np.arange(m)
    dl = op.Where(ctx.const(rows == 0), 0.0, dl)  # dl[0] and du[m-1] lie outside the matrix
    du = op.Where(ctx.const(rows == m - 1), 0.0, du)
    dtype = np.dtype(b_aval.dtype)
    vec_aval = mx.aval(ctx.avals_in[1].shape, dtype)
    zero_vec = op.Where(ctx.const(np.zeros((1,) * (rank - 1), dtype=bool)), d, 0.0)
    zero_b = op.Where(ctx.const(np.zeros((1,) * rank, dtype=bool)), b, 0.0)

    def forward(sub, i, cp, bp):
        o = sub.op
        r = mx.iota(sub, m)
        at_i, at_prev = o.Equal(r, i), o.Equal(r, o.Sub(i, sub.i64(1)))
        at_i_c, at_prev_c = o.Unsqueeze(at_i, sub.i64([-1])), o.Unsqueeze(at_prev, sub.i64([-1]))
        c_prev = mx.pick(sub, cp, at_prev, -1)  # [..., 1]; 0 at i = 0
        l_i, d_i, u_i = (mx.pick(sub, v, at_i, -1) for v in (dl, d, du))
        w = o.Sub(d_i, o.Mul(l_i, c_prev))
        cp = o.Where(at_i, o.Div(u_i, w), cp)
        b_prev = mx.pick(sub, bp, at_prev_c, -2)  # [..., 1, n]
        w_c, l_c = o.Unsqueeze(w, sub.i64([-1])), o.Unsqueeze(l_i, sub.i64([-1]))
        row = o.Div(o.Sub(mx.pick(sub, b, at_i_c, -2), o.Mul(l_c, b_prev)), w_c)
        return [cp, o.Where(at_i_c, row, bp)]

    cp, bp = mx.loop(ctx, m, [(zero_vec, vec_aval), (zero_b, b_aval)], forward, "thomas_forward")

    def backward(sub, it, x):
        o = sub.op
        i = o.Sub(sub.i64(m - 1), it)
        r = mx.iota(sub, m)
        at_i, at_next = o.Equal(r, i), o.Equal(r, o.Add(i, sub.i64(1)))
        at_i_c, at_next_c = o.Unsqueeze(at_i, sub.i64([-1])), o.Unsqueeze(at_next, sub.i64([-1]))
        c_i = o.Unsqueeze(mx.pick(sub, cp, at_i, -1), sub.i64([-1]))
        row = o.Sub(mx.pick(sub, bp, at_i_c, -2), o.Mul(c_i, mx.pick(sub, x, at_next_c, -2)))
        return [o.Where(at_i_c, row, x)]

    (x,) = mx.loop(ctx, m, [(zero_b, b_aval)], backward, "thomas_backward")
    return x


@lowerings.register("custom_linear_solve")
def lower_custom_linear_solve(ctx, *args):
    """The solve jaxpr applied to ``b``, as JAX evaluates the primitive outside autodiff (the other
    jaxprs only serve transposition)."""
    lengths = ctx.params["const_lengths"]
    jaxprs = ctx.params["jaxprs"]
    start = lengths.matvec + lengths.vecmat
    solve_consts = list(args[start : start + lengths.solve])
    n_consts = lengths.matvec + lengths.vecmat + lengths.solve + lengths.transpose_solve
    return ctx.lower_jaxpr(jaxprs.solve, solve_consts + list(args[n_consts:]))

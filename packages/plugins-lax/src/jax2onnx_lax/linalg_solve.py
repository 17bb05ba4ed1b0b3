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

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import _matrix as mx
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
        x = _substitute_unrolled(ctx, t, rhs, m, lower, unit)
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


def _substitute_unrolled(ctx, t, rhs, m, lower, unit):
    """``T X = R`` by columns, as dtrsm does it: ``x_i = r_i / t_ii``, then the rows still unsolved
    take ``r_j -= t_ji x_i``. Straight-line with static slices (see ``UNROLL_MAX``); only the
    named triangle of ``t`` is sliced."""
    op = ctx.op
    r, solved = rhs, []
    order = range(m) if lower else range(m - 1, -1, -1)
    for step, i in enumerate(order):
        left = m - step  # rows of r still unsolved: i..m-1 (lower) or 0..i (upper)
        at = 0 if lower else left - 1
        x = op.Slice(r, ctx.i64([at]), ctx.i64([at + 1]), ctx.i64([-2]))  # [..., 1, nrhs]
        if not unit:
            x = op.Div(x, op.Slice(t, ctx.i64([i, i]), ctx.i64([i + 1, i + 1]), ctx.i64([-2, -1])))
        solved.append(x)
        if left == 1:
            break
        if lower:
            col = op.Slice(t, ctx.i64([i + 1, i]), ctx.i64([m, i + 1]), ctx.i64([-2, -1]))  # [..., m-i-1, 1]
            rest = op.Slice(r, ctx.i64([1]), ctx.i64([left]), ctx.i64([-2]))
        else:
            col = op.Slice(t, ctx.i64([0, i]), ctx.i64([i, i + 1]), ctx.i64([-2, -1]))  # [..., i, 1]
            rest = op.Slice(r, ctx.i64([0]), ctx.i64([left - 1]), ctx.i64([-2]))
        r = op.Sub(rest, op.Mul(col, x))
    if not lower:
        solved.reverse()
    return op.Concat(*solved, axis=-2) if len(solved) > 1 else solved[0]


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


# ---------------------------------------------------------------------------------------------
# testcases

_TOL = dict(rtol=1e-4, atol=1e-5, rtol_f64=1e-10, atol_f64=1e-11)


def _tri_matrix(rng, shape, dtype):
    """A well-conditioned triangular-solve operand: strong diagonal, and garbage in both triangles
    (the lowering must read only the named one)."""
    a = rng.standard_normal(shape)
    if len(shape) >= 2 and shape[-1] == shape[-2] and shape[-1] in (4, 5):
        a = a + 4.0 * np.eye(shape[-1])
    return a


def _ts(**flags):
    return lambda a, b: lax.linalg.triangular_solve(a, b, **flags)


_FLAG_CASES = [
    ("triangular_solve_left_lower", dict(left_side=True, lower=True)),
    ("triangular_solve_left_upper", dict(left_side=True, lower=False)),
    ("triangular_solve_left_lower_transpose", dict(left_side=True, lower=True, transpose_a=True)),
    ("triangular_solve_left_upper_transpose_unit", dict(left_side=True, lower=False, transpose_a=True,
                                                        unit_diagonal=True)),
    ("triangular_solve_right_lower", dict(left_side=False, lower=True)),
    ("triangular_solve_right_upper_transpose", dict(left_side=False, lower=False, transpose_a=True)),
    ("triangular_solve_right_lower_unit_conjugate", dict(left_side=False, lower=True, unit_diagonal=True,
                                                         conjugate_a=True)),
]


def _tridiag(dl, d, du, b):
    return lax.linalg.tridiagonal_solve(dl, d + 4.0, du, b)


def implicit_heat_steps(u0):
    """Backward-Euler heat equation: each of 5 steps solves (I - r D2) u' = u, D2 the 1-D Laplacian
    with Dirichlet ends, with the tridiagonal solver inside a fori_loop."""
    n = u0.shape[-1]
    r = 0.4
    diag = jnp.full((n,), 1.0 + 2.0 * r, u0.dtype)
    off = jnp.full((n,), -r, u0.dtype)

    def step(_, u):
        return lax.linalg.tridiagonal_solve(off, diag, off, u[:, None])[:, 0]

    return lax.fori_loop(0, 5, step, u0)


def implicit_dense_steps(u0, k):
    """The same time step with a dense operator and jnp.linalg.solve (LU + triangular solves)."""
    n = u0.shape[-1]
    a = jnp.eye(n, dtype=u0.dtype) + 0.1 * (k @ k.T)

    def step(_, u):
        return jnp.linalg.solve(a, u)

    return lax.fori_loop(0, 3, step, u0)


components = [
    Component("lax.linalg.triangular_solve", onnx=["Slice", "Div", "Loop"], since="v0.8.0", testcases=[
        *[Testcase(name, _ts(**flags), [("B", 4, 4), ("B", 4, 3) if flags["left_side"] else ("B", 3, 4)],
                   input_generator=_tri_matrix, **_TOL) for name, flags in _FLAG_CASES],
        Testcase("solve_triangular_scipy", lambda a, b: jsl.solve_triangular(a, b, lower=True, trans=1),
                 [(5, 5), (5,)], input_generator=_tri_matrix, **_TOL),
        Testcase("solve", jnp.linalg.solve, [(4, 4), (4, 2)], input_generator=_tri_matrix, **_TOL),
        Testcase("solve_vmapped_vector", jax.vmap(jnp.linalg.solve), [("B", 5, 5), ("B", 5)], input_generator=_tri_matrix,
                 **_TOL),
        Testcase("inv", jnp.linalg.inv, [("B", 4, 4)], input_generator=_tri_matrix, **_TOL),
        Testcase("tensorsolve", lambda a, b: jnp.linalg.tensorsolve(a.reshape(2, 2, 4), b.reshape(2, 2)),
                 [(4, 4), (4,)], input_generator=_tri_matrix, **_TOL),
        Testcase("custom_linear_solve_cg", lambda a, b: jax.scipy.sparse.linalg.cg(a @ a.T + 4 * jnp.eye(4), b)[0],
                 [(4, 4), (4,)], **_TOL),
        Testcase("implicit_dense_time_step", implicit_dense_steps, [(4,), (4, 4)], **_TOL),
    ]),
    Component("lax.linalg.tridiagonal_solve", onnx=["Loop", "Div"], since="v0.8.0", testcases=[
        Testcase("tridiagonal_solve", _tridiag, [(6,), (6,), (6,), (6, 2)], **_TOL),
        Testcase("tridiagonal_solve_batched", _tridiag, [("B", 6), ("B", 6), ("B", 6), ("B", 6, 2)], **_TOL),
        Testcase("implicit_heat_time_step", implicit_heat_steps, [(8,)], **_TOL),
    ]),
]

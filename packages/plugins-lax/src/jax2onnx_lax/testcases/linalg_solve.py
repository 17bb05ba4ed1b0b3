"""Testcases of :mod:`jax2onnx_lax.linalg_solve` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

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
    Component("lax.linalg.triangular_solve", onnx=["MatMul", "Reciprocal", "Loop"], since="v0.8.0", testcases=[
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

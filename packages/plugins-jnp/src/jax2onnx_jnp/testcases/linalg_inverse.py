"""Testcases of :mod:`jax2onnx_jnp.linalg_inverse`: ``jnp.linalg.solve``/``inv`` and
``jax.scipy.linalg.solve`` become one ``com.microsoft.Inverse`` under ``target="onnxruntime"``
(each case checks the graph has exactly one), and stay standard ONNX under the default target.
Singular inputs: tests/test_linalg_inverse.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax2onnx.testing import Component, Testcase


def _well_conditioned(rng, shape, dtype):
    """A square operand gets a boosted diagonal (condition number ~10), so float32 tolerances hold;
    a right-hand side stays standard normal."""
    a = rng.standard_normal(shape)
    if len(shape) >= 2 and shape[-1] == shape[-2]:
        a = a + 3.0 * np.eye(shape[-1])
    return a


def _inverse_count(model) -> int:
    return sum(1 for n in model.graph.node if n.op_type == "Inverse" and n.domain == "com.microsoft")


def _one_inverse(model, variant) -> None:
    count = _inverse_count(model)
    assert count == 1, f"{variant.id}: expected one com.microsoft.Inverse under target='onnxruntime', found {count}"


# Testcases look the functions up at call time: a reference taken at import would bypass the patch.
def _solve(a, b):
    return jnp.linalg.solve(a, b)


def _inv(a):
    return jnp.linalg.inv(a)


def _solve_int_rhs(a, b):
    return jnp.linalg.solve(a, jnp.round(b).astype(jnp.int32))  # promoted to a's float dtype


def _scipy_solve(a, b):
    return jsl.solve(a, b)


def _scipy_solve_pos(a, b):
    spd = a @ jnp.swapaxes(a, -1, -2) + a.shape[-1] * jnp.eye(a.shape[-1], dtype=a.dtype)
    return jsl.solve(spd, b, assume_a="pos")


def _grad_of_solve(a, b):
    return jax.grad(lambda m: jnp.sum(jnp.linalg.solve(m, b) ** 2))(a)


def _grad_of_inv(a):
    return jax.grad(lambda m: jnp.sum(jnp.sin(jnp.linalg.inv(m))))(a)


def _vmap_solve_shared_matrix(a, b):
    return jax.vmap(_solve, in_axes=(None, 0))(a, b)


def _ort(name, fn, shapes, **kw):
    return Testcase(name, fn, shapes, input_generator=_well_conditioned, target="onnxruntime",
                    expected_ops=["Inverse"], check=_one_inverse, **kw)


components = [
    Component(
        "jnp.linalg.solve",
        onnx=["Inverse", "MatMul"],
        description='target="onnxruntime": com.microsoft.Inverse, the product with b and one refinement step',
        testcases=[
            _ort("solve_ort_vector_rhs", _solve, [("B", 5, 5), (5,)]),
            _ort("solve_ort_matrix_rhs", _solve, [(4, 4), (4, 3)]),
            _ort("solve_ort_broadcast_batches", _solve, [("B", 1, 4, 4), (3, 4, 2)]),
            _ort("solve_ort_matrix_batch_rhs", _solve, [(4, 4), ("B", 4, 2)]),
            _ort("solve_ort_vmap", jax.vmap(_solve), [("B", 4, 4), ("B", 4)]),
            _ort("solve_ort_vmap_matrix_rhs", jax.vmap(_solve), [("B", 4, 4), ("B", 4, 2)]),
            _ort("solve_ort_vmap_shared_matrix", _vmap_solve_shared_matrix, [(4, 4), ("B", 4)]),
            _ort("solve_ort_vmap_shared_batched_matrix", _vmap_solve_shared_matrix, [(2, 4, 4), ("B", 3, 1, 4, 2)]),
            _ort("solve_ort_vmap_rhs_unmapped", jax.vmap(_solve, in_axes=(0, None)), [("B", 4, 4), (4,)]),
            _ort("solve_ort_nested_vmap", jax.vmap(jax.vmap(_solve)), [(2, "B", 3, 3), (2, "B", 3)]),
            _ort("solve_ort_int_rhs", _solve_int_rhs, [(4, 4), (4,)]),
            _ort("solve_ort_symbolic_size", _solve, [("N", "N"), ("N", 2)], static_sizes={"N": 4}),
            # grad: the differentiated region is not the recorded call, its body (the LU) is lowered
            Testcase("solve_ort_grad", _grad_of_solve, [(4, 4), (4,)], input_generator=_well_conditioned,
                     target="onnxruntime"),
            Testcase("solve_generic", _solve, [("B", 4, 4), ("B", 4, 2)], input_generator=_well_conditioned,
                     forbidden_ops=["Inverse"]),
        ],
    ),
    Component(
        "jnp.linalg.inv",
        onnx=["Inverse"],
        description='target="onnxruntime": com.microsoft.Inverse',
        testcases=[
            _ort("inv_ort", _inv, [(5, 5)]),
            _ort("inv_ort_batched", _inv, [("B", 2, 4, 4)]),
            _ort("inv_ort_vmap", jax.vmap(_inv), [("B", 4, 4)]),
            _ort("inv_ort_symbolic_size", _inv, [("B", "N", "N")], static_sizes={"N": 4}),

            Testcase("inv_ort_grad", _grad_of_inv, [(4, 4)], input_generator=_well_conditioned, target="onnxruntime"),
            Testcase("inv_generic", _inv, [("B", 4, 4)], input_generator=_well_conditioned, forbidden_ops=["Inverse"]),
        ],
    ),
    Component(
        "jax.scipy.linalg.solve",
        onnx=["Inverse", "MatMul"],
        description='target="onnxruntime", assume_a "gen"/"sym"/"her": as jnp.linalg.solve; "pos": Cholesky (the library\'s)',
        testcases=[
            _ort("scipy_solve_ort", _scipy_solve, [("B", 4, 4), ("B", 4, 2)]),
            # "pos" is the library's Cholesky solve, not the solve region: its Sqrt shows (under this
            # target a float32 cholesky itself uses Inverse, jax2onnx_lax.linalg_cholesky_inverse)
            Testcase("scipy_solve_ort_pos", _scipy_solve_pos, [(4, 4), (4, 2)], target="onnxruntime",
                     expected_ops=["Sqrt"]),
        ],
    ),
]

"""Testcases of :mod:`jax2onnx_jnp.linalg` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.testing import Component, Testcase


def _attention_logits(q, k):
    return jnp.einsum("BNH,BMH->BNM", q, k)


def _matmul(a, b):
    # Testcases look jnp.matmul up at call time: a reference taken at import would bypass the patch.
    return jnp.matmul(a, b)


def _vmapped_matmul(a, b):
    return jax.vmap(_matmul)(a, b)


def _matmul_in_scan(h0, ws):
    def step(h, w):
        h = jnp.tanh(jnp.matmul(h, w))
        return h, h

    return jax.lax.scan(step, h0, ws)


def _grad_of_einsum(a, b):
    return jax.grad(lambda x: jnp.sum(jnp.einsum("ij,jk->ik", x, b) ** 2))(a)


def _grad_of_matmul_square(a, b):
    # Square operands: the backward pass is a jit with the same name and the same operand shapes
    # as the forward call; only its body tells them apart.
    return jax.grad(lambda x: jnp.sum(jnp.sin(x @ b)))(a)


def _roots(p):
    # strip_zeros=False: traceable (leading zeros give NaN roots, as in JAX); the order is
    # eigvals' of the companion matrix, compared as it comes.
    return jnp.roots(p, strip_zeros=False)


def _poly(*coeffs):
    return [np.array(coeffs, np.float32)]


def _roots_case(name, *polys, rtol=1e-4, atol=1e-4):
    """One polynomial: ``jnp.roots`` of it. Several of one degree: ``jnp.roots`` vmapped over them, one
    export checking each (an eig export costs seconds at three opsets)."""
    fn, values = (_roots, _poly(*polys[0])) if len(polys) == 1 else (jax.vmap(_roots), _poly(*polys))
    return Testcase(name, fn, input_values=values, expected_ops=["TopK"] if len(polys[0]) > 2 else (),
                    rtol=rtol, atol=atol, rtol_f64=1e-7, atol_f64=1e-7)


components = [
    Component(
        name="jnp.einsum",
        onnx=["Einsum"],
        since="v0.1.0",
        testcases=[
            Testcase("einsum_vector_dot", lambda x, y: jnp.einsum("i,i->", x, y), [(5,), (5,)], expected_ops=["Einsum"]),
            Testcase("einsum_matrix_vector", lambda x, y: jnp.einsum("ij,j->i", x, y), [(3, 5), (5,)],
                     expected_ops=["Einsum"]),
            Testcase("einsum_matrix_matrix", lambda x, y: jnp.einsum("ij,jk->ik", x, y), [("B", 5), (5, 2)],
                     expected_ops=["Einsum"]),
            Testcase("einsum_transpose", lambda x: jnp.einsum("ij->ji", x), [(3, 5)], expected_ops=["Einsum"]),
            # no bool or bfloat16 Einsum in ONNX: bool declines to the lax body, bfloat16 runs in float32
            Testcase("einsum_bool", lambda x, y: jnp.einsum("ij,kj->ik", x, y),
                     input_values=[np.asarray([[True, False, True], [False, False, False]]),
                                   np.asarray([[False, False, True], [True, True, False]])]),
            Testcase("einsum_bfloat16", lambda x, y: jnp.einsum("ij,kj->ik", x.astype(jnp.bfloat16),
                                                                y.astype(jnp.bfloat16)).astype(x.dtype),
                     [(2, 3), (4, 3)], expected_ops=["Einsum"], rtol=2e-2, atol=2e-2, rtol_f64=2e-2, atol_f64=2e-2),
            Testcase("einsum_batch_transpose", lambda x: jnp.einsum("...ij->...ji", x), [("B", 3, 5)],
                     expected_ops=["Einsum"]),
            Testcase("einsum_diag", lambda x: jnp.einsum("ii->i", x), [(4, 4)], expected_ops=["Einsum"]),
            Testcase("einsum_sum_reduce", lambda x: jnp.einsum("ij->", x), [(3, 5)], expected_ops=["Einsum"]),
            Testcase("einsum_multi_operand", lambda a, b, c: jnp.einsum("ij,jk,kl->il", a, b, c),
                     [(2, 3), (3, 4), (4, 5)], expected_ops=["Einsum"]),
            Testcase("einsum_attention_logits_orig", _attention_logits, [("B", 4, 8), ("B", 6, 8)],
                     expected_ops=["Einsum"]),
            Testcase("einsum_attention_output_orig", lambda p, v: jnp.einsum("BNM,BMH->BNH", p, v),
                     [("B", 4, 6), ("B", 6, 8)], expected_ops=["Einsum"]),
            Testcase("einsum_attention_logits_batched", lambda q, k: jnp.einsum("...NH,...MH->...NM", q, k),
                     [("B", 2, 4, 8), ("B", 2, 6, 8)], expected_ops=["Einsum"]),
            Testcase("einsum_attention_output_batched", lambda p, v: jnp.einsum("...NM,...MH->...NH", p, v),
                     [("B", 2, 4, 6), ("B", 2, 6, 8)], expected_ops=["Einsum"]),
            Testcase("einsum_ellipsis_rank_mismatch", lambda x, y: jnp.einsum("...ij,...jk->...ik", x, y),
                     [("B", 3, 4), (4, 5)], expected_ops=["Einsum"]),
            # A lettered axis of size 1 broadcasts against its letter elsewhere, as JAX allows (the
            # published jax2onnx 0.17.1's testcases, by name and inputs): expanded before ONNX's Einsum.
            Testcase("einsum_ellipsis_letter_broadcast", lambda q, k: jnp.einsum("...BTNH,...BSNH->...BNTS", q, k),
                     [(2, 1, 4, 8, 32), (2, 5, 8, 32)], expected_ops=["Einsum", "Expand"]),
            Testcase("einsum_attention_logits_batched_rank_mismatch",
                     lambda q, k: jnp.einsum("...BTNH,BSNH->...BNTS", q, k), [(2, 1, 4, 8, 16), (2, 5, 8, 16)],
                     expected_ops=["Einsum", "Expand"]),
            Testcase("einsum_attention_logits_batched_letter_one",
                     lambda q, k: jnp.einsum("...BTNH,BSNH->...BNTS", q, k), [("B", 1, 4, 8, 32), ("B", 4, 8, 32)],
                     expected_ops=["Einsum"]),
            Testcase("einsum_attention_output_batched_letter_one",
                     lambda p, v: jnp.einsum("...BNTS,BSNH->...BTNH", p, v), [("B", 1, 8, 4, 4), ("B", 4, 8, 32)],
                     expected_ops=["Einsum"]),
            Testcase("einsum_letter_broadcast_to_symbolic", lambda q, k: jnp.einsum("...BTNH,...BSNH->...BNTS", q, k),
                     [(2, 1, 4, 8, 8), ("B", 5, 8, 8)], expected_ops=["Einsum", "Expand"]),
            Testcase("einsum_letter_broadcast_three_operands", lambda a, b, c: jnp.einsum("ij,ij,j->ij", a, b, c),
                     [(1, 4), (3, 4), (1,)], expected_ops=["Einsum", "Expand"]),
            Testcase("einsum_letter_broadcast_vmap", jax.vmap(lambda q, k: jnp.einsum("...BTNH,...BSNH->...BNTS", q, k)),
                     [("V", 2, 1, 4, 8, 8), ("V", 2, 5, 8, 8)],
                     description="under vmap JAX's own einsum (dot_general) is lowered: it squeezes the size-1 letter"),
            Testcase("einsum_implicit_output", lambda x, y: jnp.einsum("kj,ji", x, y), [(3, 4), (4, 2)],
                     expected_ops=["Einsum"], description="implicit output: sorted letters ('ik')"),
            Testcase("einsum_mixed_dtypes", lambda x, i: jnp.einsum("ij,j->i", x, i),
                     [(3, 4), jax.ShapeDtypeStruct((4,), jnp.int32)], expected_ops=["Einsum"]),
            Testcase("einsum_vmap", jax.vmap(_attention_logits), [("B", 2, 4, 8), ("B", 2, 6, 8)],
                     description="under vmap the marked call gains a batch axis: its body is lowered"),
            Testcase("einsum_grad", _grad_of_einsum, [("B", 4), (4, 3)]),
            Testcase("einsum_inside_jit", jax.jit(lambda x, y: jnp.einsum("ij,jk->ik", x, y)), [("B", 5), (5, 2)],
                     expected_ops=["Einsum"], description="a user jit is traced during the export: still marked"),
        ],
    ),
    Component(
        name="jnp.matmul",
        onnx=["MatMul"],
        since="v0.1.0",
        testcases=[
            Testcase("matmul_2d", _matmul, [(3, 4), (4, 5)], expected_ops=["MatMul"]),
            Testcase("matmul_1d_2d", _matmul, [(4,), (4, 5)], expected_ops=["MatMul"]),
            Testcase("matmul_2d_1d", _matmul, [(3, 4), (4,)], expected_ops=["MatMul"]),
            Testcase("matmul_dynamic", _matmul, [("B", 3, 4), ("B", 4, 5)], expected_ops=["MatMul"]),
            Testcase("matmul_dynamic_a", _matmul, [("B", 3, 4), (4, 5)], expected_ops=["MatMul"]),
            Testcase("matmul_1d", _matmul, [(4,), (4,)], expected_ops=["MatMul"]),
            Testcase("matmul_3d", _matmul, [(2, 3, 4), (2, 4, 5)], expected_ops=["MatMul"]),
            Testcase("matmul_broadcast_batch", _matmul, [(2, 1, 3, 4), (5, 4, 2)], expected_ops=["MatMul"]),
            Testcase("matmul_int", _matmul, [jax.ShapeDtypeStruct(("B", 3), jnp.int32),
                                                 jax.ShapeDtypeStruct((3, 2), jnp.int32)], expected_ops=["MatMul"]),
            # no MatMul for bool or small ints: the lax body (int32, wrapping back like JAX)
            Testcase("matmul_int8_wraps", _matmul, input_values=[np.asarray([[100, -128, 3], [1, 2, 127]], np.int8),
                                                                 np.asarray([[100, 1], [1, 1], [2, -1]], np.int8)]),
            Testcase("matmul_bool", _matmul, input_values=[np.asarray([[True, False], [False, False]]),
                                                           np.asarray([[False, True], [True, True]])]),
            Testcase("matmul_vmap", _vmapped_matmul, [("B", 3, 4), ("B", 4, 5)]),
            Testcase("matmul_grad_square", _grad_of_matmul_square, [(3, 3), (3, 3)]),
            Testcase("matmul_in_scan", _matmul_in_scan, [("B", 4), (3, 4, 4)], expected_ops=["MatMul"],
                     description="a marked call inside a scan body is lowered in the ONNX loop body"),
        ],
    ),
    Component(
        name="jnp.roots",
        onnx=["Loop", "TopK", "GatherElements"],
        since="v0.1.0",
        description="eigenvalues of the companion matrix (lax's eig), complex results as real pairs",
        testcases=[
            _roots_case("roots_linear", (2.0, -3.0)),
            # real roots and a complex pair; a leading zero (NaN roots, as JAX's) and three real roots
            _roots_case("roots_quadratic_real_and_complex", (1.0, -3.0, 2.0), (1.0, 2.0, 5.0)),
            _roots_case("roots_cubic_and_leading_zero", (1.0, -6.0, 11.0, -6.0), (0.0, 1.0, -3.0, 2.0)),
            _roots_case("roots_quintic", (1.0, 0.5, -2.0, 0.3, 1.0, -0.7)),
        ],
    ),
]

"""Testcases of :mod:`jax2onnx_lax.linalg` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ._testdata import spec


def _dot(dims, preferred=None):
    def fn(x, y):
        return lax.dot_general(x, y, dims, preferred_element_type=preferred)

    return fn


_WEIGHT = np.linspace(-1.0, 1.0, 20, dtype=np.float32).reshape(5, 4)


def dense_constant_weight_transposed(x):
    # x @ W.T with a constant W: the Transpose must fold into the initializer.
    return lax.dot_general(x, jnp.asarray(_WEIGHT, x.dtype), (((1,), (1,)), ((), ())))


components = [
    Component(
        name="lax.dot_general",
        onnx=["MatMul", "Einsum"],
        since="v0.2.0",
        testcases=[
            Testcase("dot_general", _dot((((1,), (0,)), ((), ()))), [("B", 4), (4, 5)], expected_ops=["MatMul"],
                     max_nodes=1),
            Testcase("dot_general_rank3_lhs", _dot((((2,), (0,)), ((), ()))), [("B", 3, 4), (4, 5)],
                     expected_ops=["MatMul"], max_nodes=1),
            Testcase("dot_general_vector", _dot((((0,), (0,)), ((), ()))), [("N",), ("N",)], expected_ops=["MatMul"]),
            Testcase("dot_general_batched", _dot((((2,), (1,)), ((0,), (0,)))), [("B", 3, 4), ("B", 4, 2)],
                     expected_ops=["MatMul"], max_nodes=1),
            Testcase("dot_general_batch_last", _dot((((0,), (1,)), ((2,), (0,)))), [(4, 3, "B"), ("B", 4, 2)],
                     expected_ops=["MatMul", "Transpose"]),
            Testcase("dot_general_lhs_contract_first", _dot((((0,), (0,)), ((), ()))), [("K", 3), ("K", 2)],
                     expected_ops=["MatMul"]),
            Testcase("dot_general_constant_weight_transposed", dense_constant_weight_transposed, [("B", 4)],
                     expected_ops=["MatMul"], forbidden_ops=["Transpose"], max_nodes=1),
            Testcase("dot_general_two_contracting", _dot((((1, 2), (0, 1)), ((), ()))), [("B", 3, 4), (3, 4, 2)],
                     expected_ops=["Einsum"]),
            Testcase("dot_general_batched_matvec", _dot((((2,), (1,)), ((0,), (0,)))), [("B", 3, 4), ("B", 4)],
                     expected_ops=["Einsum"]),
            Testcase("dot_general_outer", _dot((((), ()), ((), ()))), [("B",), (3,)], expected_ops=["Einsum"]),
            Testcase("dot_general_int32", _dot((((1,), (0,)), ((), ()))), [spec("B", 3), spec(3, 2)],
                     expected_ops=["MatMul"]),
            Testcase("dot_general_int8_preferred_int32", _dot((((1,), (0,)), ((), ())), jnp.int32),
                     [spec("B", 3, dtype=jnp.int8), spec(3, 2, dtype=jnp.int8)], expected_ops=["MatMul"]),
            Testcase("dot_general_int8", _dot((((1,), (0,)), ((), ()))),
                     [spec("B", 8, dtype=jnp.int8), spec(8, 2, dtype=jnp.int8)], expected_ops=["MatMul", "Cast"],
                     input_generator=lambda rng, shape, dt: rng.integers(-100, 100, shape)),
            Testcase("dot_general_jnp_matmul", lambda x, y: jnp.matmul(x, y), [("B", 2, 3, 4), ("B", 2, 4, 5)],
                     expected_ops=["MatMul"]),
            Testcase("dot_general_batched_rhs_transposed", _dot((((2,), (2,)), ((0,), (0,)))),
                     [("B", 3, 4), ("B", 5, 4)], expected_ops=["MatMul", "Transpose"]),
        ],
    ),
]

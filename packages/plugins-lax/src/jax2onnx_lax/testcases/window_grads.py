"""Testcases of :mod:`jax2onnx_lax.window_grads` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax
from jax2onnx.testing import Component, Testcase


def _pool_grad(reducer, init, window, strides, padding):
    def loss(x):
        y = lax.reduce_window(x, init, reducer, window, strides, padding)
        return jnp.sum(jnp.sin(y) * jnp.arange(1, y.size + 1, dtype=x.dtype).reshape(y.shape))

    return jax.grad(loss)


components = [
    Component(
        name="lax.select_and_scatter_add",
        onnx=["MaxPool", "ScatterElements"],
        since="v0.1.0",
        testcases=[
            Testcase("select_and_scatter_add_max_pool_grad", _pool_grad(lax.max, -jnp.inf, (1, 2, 2, 1), (1, 2, 2, 1),
                                                                        "VALID"),
                     [("B", 4, 6, 3)], expected_ops=["MaxPool", "ScatterElements"]),
            Testcase("select_and_scatter_add_overlapping_padded", _pool_grad(lax.max, -jnp.inf, (1, 1, 3, 3), (1, 1, 2, 1),
                                                                            ((0, 0), (0, 0), (1, 1), (1, 0))),
                     [(1, 2, 5, 4)], expected_ops=["MaxPool", "ScatterElements"]),
            Testcase("select_and_scatter_add_min_pool_grad", _pool_grad(lax.min, jnp.inf, (2, 3), (2, 1), "SAME"),
                     [(4, 6)], expected_ops=["MaxPool", "Neg"]),
        ],
    ),
]

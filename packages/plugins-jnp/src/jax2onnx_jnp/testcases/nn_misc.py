"""Testcases of :mod:`jax2onnx_jnp.nn_misc` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.testing import Component, Testcase

from .helpers import grad_of_sum


def _softmax(x):
    return jax.nn.softmax(x)


def _log_softmax_axis0(x):
    return jax.nn.log_softmax(x, axis=0)


def _indices_with_negatives(rng, shape, dtype):
    return rng.integers(-2, 5, size=shape).astype(dtype)


_IDX = jax.ShapeDtypeStruct(("B", 4), jnp.int32)


components = [
    Component(
        name="nn.softmax",
        onnx=["Softmax"],
        since="v0.1.0",
        testcases=[
            Testcase("softmax", _softmax, [(3,)], expected_ops=["Softmax"]),
            Testcase("softmax_2d", lambda x: jax.nn.softmax(x, axis=-1), [("B", 4)], expected_ops=["Softmax"]),
            Testcase("softmax_3d", lambda x: jax.nn.softmax(x, axis=1), [("B", 3, 4)], expected_ops=["Softmax"]),
            Testcase("softmax_large_logits", _softmax,
                     input_values=[np.array([[1e4, 1e4 - 1.0, 0.0], [-1e4, 0.0, 1.0]], np.float32)],
                     expected_ops=["Softmax"]),
            Testcase("softmax_multi_axis", lambda x: jax.nn.softmax(x, axis=(1, 2)), [("B", 3, 4)],
                     description="several axes: no single ONNX op, lowered from lax"),
            Testcase("softmax_vmap", jax.vmap(_softmax), [("B", 3, 4)]),
            Testcase("softmax_grad", grad_of_sum(_softmax), [("B", 4)]),
        ],
    ),
    Component(
        name="nn.log_softmax",
        onnx=["LogSoftmax"],
        since="v0.7.0",
        testcases=[
            Testcase("log_softmax", lambda x: jax.nn.log_softmax(x), [("B", 4)], expected_ops=["LogSoftmax"]),
            Testcase("log_softmax_axis0", _log_softmax_axis0, [(3, "B")], expected_ops=["LogSoftmax"]),
            Testcase("log_softmax_vmap", jax.vmap(_log_softmax_axis0), [("B", 3, 4)]),
            Testcase("log_softmax_grad", grad_of_sum(_log_softmax_axis0), [(3, "B")]),
        ],
    ),
    Component(
        name="nn.one_hot",
        onnx=["OneHot"],
        since="v0.7.0",
        testcases=[
            Testcase("one_hot", lambda i: jax.nn.one_hot(i, 3), [_IDX], expected_ops=["OneHot"],
                     input_generator=_indices_with_negatives,
                     description="negative and too-large indices give all-zero rows, as in JAX"),
            Testcase("one_hot_axis0_int", lambda i: jax.nn.one_hot(i, 4, dtype=jnp.int32, axis=0), [_IDX],
                     expected_ops=["OneHot"], input_generator=_indices_with_negatives),
            Testcase("one_hot_vmap", jax.vmap(lambda i: jax.nn.one_hot(i, 5)), [_IDX],
                     input_generator=_indices_with_negatives),
        ],
    ),
    Component(
        name="nn.standardize",
        onnx=["LayerNormalization", "ReduceMean", "Sub", "Sqrt", "Div"],
        since="v0.7.0",
        testcases=[
            # JAX's standardize over the last axis is a LayerNorm without scale: the rewrite stage
            # writes LayerNormalization (float32; float64 keeps the decomposition)
            Testcase("standardize", lambda x: jax.nn.standardize(x), [("B", 6)], expected_ops=["LayerNormalization"],
                     expected_ops_f64=["ReduceMean"]),
            Testcase("standardize_axes", lambda x: jax.nn.standardize(x, axis=(1, 2), epsilon=1e-3), [("B", 3, 4)],
                     expected_ops=["ReduceMean"]),
            Testcase("standardize_vmap", jax.vmap(lambda x: jax.nn.standardize(x)), [("B", 3, 4)]),
            Testcase("standardize_grad", grad_of_sum(lambda x: jax.nn.standardize(x)), [("B", 6)],
                     rtol=1e-3, atol=1e-4),
        ],
    ),
]

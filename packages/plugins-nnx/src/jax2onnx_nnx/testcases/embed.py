"""Testcases of :mod:`jax2onnx_nnx.embed` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import numpy as np
from flax import nnx
from jax2onnx.testing import Component, Testcase, param_dtype


def _embed(n: int, features: int):
    def factory():
        # float64 tables under a float64 export: flax keeps the table's dtype for lookups.
        return nnx.Embed(n, features, param_dtype=param_dtype(), rngs=nnx.Rngs(0))

    return factory


def _attend(module):
    return lambda q: module.attend(q)  # looked up at call time, when the patch is active


def _signed_ids(rng, shape, dtype):
    return rng.integers(-6, 6, size=shape).astype(dtype)


components = [
    Component(
        name="nnx.embed",
        onnx=["Gather", "MatMul"],
        since="v0.7.0",
        testcases=[
            Testcase("embed", factory=_embed(10, 4), input_shapes=[jax.ShapeDtypeStruct(("B", 5), np.int32)],
                     expected_ops=["Gather"], max_nodes=1),
            Testcase("embed_negative_ids", factory=_embed(6, 3),
                     input_shapes=[jax.ShapeDtypeStruct(("B", 2, 3), np.int32)], input_generator=_signed_ids,
                     expected_ops=["Gather"], max_nodes=1),
            Testcase("embed_attend", factory=lambda: _attend(_embed(7, 4)()), input_shapes=[("B", 3, 4)],
                     expected_ops=["MatMul"], forbidden_ops=["Transpose"], max_nodes=1),
        ],
    ),
]

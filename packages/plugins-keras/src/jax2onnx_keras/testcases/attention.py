"""Testcases of :mod:`jax2onnx_keras.attention` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from typing import Any

import numpy as np
from jax2onnx.testing import Component, Testcase

from ._testing import import_keras, randomize


def _mha(kind: str, **kw: Any):
    def factory():
        keras = import_keras()
        layer = keras.layers.MultiHeadAttention(num_heads=2, key_dim=4, **kw)
        q = np.zeros((1, 3, 6), np.float32)
        kv = np.zeros((1, 4, 5), np.float32)
        if kind == "self":
            layer(q, q)
        elif kind == "cross_key":
            layer(q, kv, kv)
        else:
            layer(q, kv)
        randomize(layer)
        if kind == "self":
            return lambda x: layer(x, x, training=False)
        if kind == "cross_key":
            return lambda x, m: layer(x, m, m * 0.5, training=False)
        return lambda x, m: layer(x, m, training=False)

    return factory


_NO_LAYOUT = ["Transpose", "Einsum", "Softmax"]


components = [
    Component(
        name="keras.MultiHeadAttention",
        onnx=["Attention", "MatMul", "Add", "Split"],
        since="v0.1.0",
        testcases=[
            Testcase("keras_mha_self", factory=_mha("self"), input_shapes=[("B", "T", 6)],
                     expected_ops=["Attention", "Split"], forbidden_ops=_NO_LAYOUT, max_nodes=6, run_f64=False),
            Testcase("keras_mha_cross", factory=_mha("cross"), input_shapes=[("B", "T", 6), ("B", "S", 5)],
                     expected_ops=["Attention"], forbidden_ops=_NO_LAYOUT, max_nodes=9, run_f64=False),
            Testcase("keras_mha_cross_key", factory=_mha("cross_key"), input_shapes=[("B", "T", 6), ("B", "S", 5)],
                     expected_ops=["Attention"], forbidden_ops=_NO_LAYOUT, run_f64=False),
            Testcase("keras_mha_no_bias", factory=_mha("self", use_bias=False),
                     input_shapes=[("B", "T", 6)], expected_ops=["Attention"], forbidden_ops=_NO_LAYOUT,
                     max_nodes=4, run_f64=False),
        ],
    ),
]

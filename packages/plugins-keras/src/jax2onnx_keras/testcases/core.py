"""Testcases of :mod:`jax2onnx_keras.core` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import numpy as np
from jax2onnx.testing import Component, Testcase

from ._testing import keras_model


def _dense(units, **kw):
    def build(keras):
        return keras.layers.Dense(units, **kw)

    return build


def _einsum_dense(equation, output_shape, **kw):
    def build(keras):
        return keras.layers.EinsumDense(equation, output_shape, **kw)

    return build


components = [
    Component(
        name="keras.Dense",
        onnx=["Gemm", "MatMul", "Add"],
        since="v0.1.0",
        testcases=[
            Testcase("keras_dense", factory=keras_model(_dense(5), (8,)), input_shapes=[("B", 8)],
                     expected_ops=["Gemm"], max_nodes=1, run_f64=False),
            Testcase("keras_dense_relu", factory=keras_model(_dense(5, activation="relu"), (8,)),
                     input_shapes=[("B", 8)], expected_ops=["Gemm", "Relu"], max_nodes=2, run_f64=False),
            Testcase("keras_dense_no_bias", factory=keras_model(_dense(5, use_bias=False), (8,)),
                     input_shapes=[("B", 8)], expected_ops=["Gemm"], max_nodes=1, run_f64=False),
            Testcase("keras_dense_high_rank", factory=keras_model(_dense(5, activation="gelu"), (None, 8)),
                     input_shapes=[("B", "T", 8)], expected_ops=["MatMul", "Add", "Gelu"],
                     forbidden_ops=["Reshape", "Shape", "Concat", "Erf"], max_nodes=3, run_f64=False),
            *[
                Testcase(f"keras_dense_{act}", factory=keras_model(_dense(4, activation=act), (6,)),
                         input_shapes=[("B", 6)], expected_ops=["Gemm"], max_nodes=3, run_f64=False)
                for act in ("sigmoid", "tanh", "softmax", "elu", "selu", "softplus", "softsign", "silu", "relu6",
                            "leaky_relu", "hard_sigmoid", "hard_silu", "exponential", "log_softmax")
            ],
            # A custom activation: Keras's own math for the layer, still correct.
            Testcase("keras_dense_custom_activation",
                     factory=keras_model(_dense(4, activation=lambda x: x * 0.5 + 1.0), (6,)),
                     input_shapes=[("B", 6)], run_f64=False),
            Testcase("keras_dense_vmap", factory=keras_model(_dense(4, activation="relu"), (6,), wrap=jax.vmap),
                     input_shapes=[("B", 2, 6)], run_f64=False),
        ],
    ),
    Component(
        name="keras.Embedding",
        onnx=["Gather"],
        since="v0.1.0",
        testcases=[
            Testcase("keras_embedding", factory=keras_model(lambda keras: keras.layers.Embedding(11, 4), (None,),
                                                            dtype=np.int32),
                     input_shapes=[jax.ShapeDtypeStruct(("B", "T"), np.int32)], static_sizes={"T": 5},
                     input_generator=lambda rng, shape, dtype: rng.integers(-11, 11, size=shape).astype(dtype),
                     expected_ops=["Gather"], max_nodes=1, run_f64=False),
            Testcase("keras_embedding_float_ids", factory=keras_model(lambda keras: keras.layers.Embedding(11, 4),
                                                                      (None,)),
                     input_shapes=[("B", "T")], static_sizes={"T": 5},
                     input_generator=lambda rng, shape, dtype: rng.integers(0, 11, size=shape).astype(dtype),
                     expected_ops=["Gather"], max_nodes=2, run_f64=False),
        ],
    ),
    Component(
        name="keras.EinsumDense",
        onnx=["MatMul", "Gemm", "Add", "Einsum"],
        since="v0.1.0",
        testcases=[
            Testcase("keras_einsum_dense_matmul",
                     factory=keras_model(_einsum_dense("abc,cd->abd", (None, 6), bias_axes="d"), (None, 4)),
                     input_shapes=[("B", "T", 4)], expected_ops=["MatMul", "Add"], forbidden_ops=["Einsum"],
                     max_nodes=2, run_f64=False),
            Testcase("keras_einsum_dense_heads",
                     factory=keras_model(_einsum_dense("abc,cde->abde", (None, 2, 3), bias_axes="de"), (None, 4)),
                     input_shapes=[("B", "T", 4)], expected_ops=["MatMul", "Reshape"], forbidden_ops=["Einsum"],
                     max_nodes=3, run_f64=False),
            Testcase("keras_einsum_dense_2d",
                     factory=keras_model(_einsum_dense("ab,bc->ac", 3, bias_axes="c", activation="relu"), (5,)),
                     input_shapes=[("B", 5)], expected_ops=["Gemm", "Relu"], max_nodes=2, run_f64=False),
            Testcase("keras_einsum_dense_two_contracted",
                     factory=keras_model(_einsum_dense("abcd,cde->abe", (None, 5), bias_axes="e"), (None, 2, 3)),
                     input_shapes=[("B", "T", 2, 3)], expected_ops=["MatMul", "Reshape"], forbidden_ops=["Einsum"],
                     max_nodes=3, run_f64=False),
            Testcase("keras_einsum_dense_general",
                     factory=keras_model(_einsum_dense("abc,dc->abd", (None, 3)), (None, 4)),
                     input_shapes=[("B", "T", 4)], expected_ops=["Einsum"], max_nodes=1, run_f64=False),
        ],
    ),
]

"""Keras mixed precision policies export as traced (no float32 detour), load in onnxruntime and
match; to_onnx's precision= options meet such a model with one clear line where they do not apply."""

from __future__ import annotations

import keras
import numpy as np
import onnx
import pytest
from jax2onnx import PrecisionError, to_onnx
from jax2onnx.verification.compare import run_onnx
from jax2onnx.verification.precision import cosine


@pytest.fixture(params=["mixed_bfloat16", "mixed_float16"])
def mixed_model(request):
    keras.config.set_dtype_policy(request.param)
    try:
        model = keras.Sequential([
            keras.Input((32,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.LayerNormalization(),
            keras.layers.Dense(10),
            keras.layers.Activation("softmax", dtype="float32"),
        ])
    finally:
        keras.config.set_dtype_policy("float32")
    return request.param, model


def test_mixed_policy_exports_as_traced_and_loads(mixed_model):
    policy, model = mixed_model
    x = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
    reference = np.asarray(model(x, training=False))
    proto = to_onnx(lambda v: model(v, training=False), [("B", 32)])
    onnx.checker.check_model(proto, full_check=True)
    low = onnx.TensorProto.BFLOAT16 if policy == "mixed_bfloat16" else onnx.TensorProto.FLOAT16
    assert any(n.op_type == "Cast" and n.attribute[0].i == low for n in proto.graph.node)  # computes in the policy's type
    (got,) = run_onnx(proto, [x])
    assert got.dtype == np.float32
    assert cosine(reference, got) >= 0.9999


def test_quantizing_a_mixed_policy_model_says_why_not(mixed_model):
    _, model = mixed_model
    with pytest.raises(PrecisionError, match="as traced with precision='float32'"):
        to_onnx(lambda v: model(v, training=False), [("B", 32)], precision="int8")

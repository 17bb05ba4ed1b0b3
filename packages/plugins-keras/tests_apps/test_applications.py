"""Keras applications built from their code with random weights (nothing is downloaded), exported with
Keras's own ``model.export(format="onnx")`` and compared with ``model(x, training=False)`` in
onnxruntime at two batch sizes. Slow (seconds per model on a laptop): the ``keras_apps`` nox session."""

from __future__ import annotations

from collections import Counter

import keras
import numpy as np
import onnx
import onnxruntime as ort
import pytest

APPS = {
    # name: (constructor keywords, image size)
    "ResNet50": ({}, 64),
    "MobileNetV3Small": ({"include_preprocessing": True}, 96),
    "EfficientNetB0": ({}, 64),
}


@pytest.mark.parametrize("name", sorted(APPS))
def test_application_exports_and_matches(name, tmp_path):
    kwargs, size = APPS[name]
    keras.utils.set_random_seed(0)
    # Logits (no softmax): with random weights the softmax is nearly uniform and would hide errors.
    model = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3), classifier_activation=None,
                                              **kwargs)
    rng = np.random.default_rng(0)
    model(np.zeros((1, size, size, 3), np.float32), training=False)
    path = tmp_path / f"{name}.onnx"
    model.export(str(path), format="onnx", verbose=False)
    proto = onnx.load(str(path))
    ops = Counter(n.op_type for n in proto.graph.node)
    convs = sum(1 for layer in model.layers if isinstance(layer, (keras.layers.Conv2D, keras.layers.DepthwiseConv2D)))
    assert ops["Conv"] == convs, f"every Conv2D/DepthwiseConv2D layer is one Conv: {ops}"
    assert not {"Loop", "Scan", "Einsum"} & set(ops), ops
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    for batch in (1, 3):
        x = rng.uniform(0.0, 255.0, (batch, size, size, 3)).astype(np.float32)
        (got,) = session.run(None, {proto.graph.input[0].name: x})
        want = np.asarray(model(x, training=False))
        scale = float(np.abs(want).max())
        assert scale > 0
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * scale)

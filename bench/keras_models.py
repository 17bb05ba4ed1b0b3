"""The Keras models of keras_bench.py, built the same way in every process (weights come from a file)."""

from __future__ import annotations

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import numpy as np  # noqa: E402


def build(name: str):
    """(model, example input) for ``name``; the model has been called once (Keras exports only then)."""
    import keras

    L = keras.layers
    rng = np.random.default_rng(0)
    if name == "resnet50":
        model = keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classifier_activation=None)
        x = rng.uniform(0, 255, (1, 224, 224, 3)).astype(np.float32)
    elif name == "bilstm":
        inp = keras.Input((100,), dtype="int32")
        h = L.Embedding(10000, 64)(inp)
        h = L.Bidirectional(L.LSTM(64, return_sequences=True))(h)
        h = L.Bidirectional(L.LSTM(32))(h)
        model = keras.Model(inp, L.Dense(1, activation="sigmoid")(h))
        x = rng.integers(0, 10000, (8, 100)).astype(np.int32)
    else:
        raise ValueError(f"unknown model {name!r}: resnet50 or bilstm")
    model(x, training=False)
    return model, x

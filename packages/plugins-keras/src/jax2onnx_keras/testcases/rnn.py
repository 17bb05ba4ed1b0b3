"""Testcases of :mod:`jax2onnx_keras.rnn` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import numpy as np
from jax2onnx.testing import Component, Testcase

from ._testing import keras_model


def _rnn(cls_name, units=4, **kw):
    def build(keras):
        return getattr(keras.layers, cls_name)(units, **kw)

    return build


def _bi(cls_name, units=3, merge_mode="concat", **kw):
    def build(keras):
        return keras.layers.Bidirectional(getattr(keras.layers, cls_name)(units, **kw), merge_mode=merge_mode)

    return build


def _text_classifier(keras):
    L = keras.layers
    return keras.Sequential([
        L.Embedding(20, 8), L.Bidirectional(L.LSTM(6, return_sequences=True)), L.Bidirectional(L.GRU(4)),
        L.Dense(3, activation="softmax"),
    ])


def _tokens(rng, shape, dtype):
    return rng.integers(0, 20, size=shape).astype(dtype)


def _cases(cls_name: str, op: str) -> list[Testcase]:
    short = cls_name.lower()
    common = {"run_f64": False, "static_sizes": {"T": 4}, "expected_ops": [op], "forbidden_ops": ["Loop", "Scan"]}
    return [
        Testcase(f"keras_{short}", factory=keras_model(_rnn(cls_name), (None, 5)), input_shapes=[("B", "T", 5)],
                 max_nodes=4, **common),
        Testcase(f"keras_{short}_sequences", factory=keras_model(_rnn(cls_name, return_sequences=True), (None, 5)),
                 input_shapes=[("B", "T", 5)], max_nodes=4, **common),
        Testcase(f"keras_{short}_go_backwards", factory=keras_model(_rnn(cls_name, go_backwards=True), (None, 5)),
                 input_shapes=[("B", "T", 5)], max_nodes=4, **common),
        Testcase(f"keras_{short}_bidirectional",
                 factory=keras_model(_bi(cls_name, return_sequences=True), (None, 5)),
                 input_shapes=[("B", "T", 5)], max_nodes=4, **common),
        Testcase(f"keras_{short}_bidirectional_last", factory=keras_model(_bi(cls_name), (None, 5)),
                 input_shapes=[("B", "T", 5)], max_nodes=4, **common),
    ]


components = [
    Component(name="keras.LSTM", onnx=["LSTM"], since="v0.1.0", testcases=[
        *_cases("LSTM", "LSTM"),
        Testcase("keras_lstm_no_bias", factory=keras_model(_rnn("LSTM", use_bias=False), (None, 5)),
                 input_shapes=[("B", "T", 5)], static_sizes={"T": 4}, expected_ops=["LSTM"], run_f64=False),
        # Keras returns go_backwards sequences in processing order: its own loop, still exact.
        Testcase("keras_lstm_go_backwards_sequences",
                 factory=keras_model(_rnn("LSTM", go_backwards=True, return_sequences=True), (None, 5)),
                 input_shapes=[("B", "T", 5)], static_sizes={"T": 4}, forbidden_ops=["LSTM"], run_f64=False),
        Testcase("keras_lstm_relu_activation", factory=keras_model(_rnn("LSTM", activation="relu"), (None, 5)),
                 input_shapes=[("B", "T", 5)], static_sizes={"T": 4}, forbidden_ops=["LSTM"], run_f64=False),
        # merge_mode="sum" runs Keras's Bidirectional code, whose two LSTM layers are fused one by one.
        Testcase("keras_bilstm_sum", factory=keras_model(_bi("LSTM", merge_mode="sum"), (None, 5)),
                 input_shapes=[("B", "T", 5)], static_sizes={"T": 4}, expected_ops=["LSTM", "Add"],
                 forbidden_ops=["Loop", "Scan"], run_f64=False),
    ]),
    Component(name="keras.GRU", onnx=["GRU"], since="v0.1.0", testcases=[
        *_cases("GRU", "GRU"),
        Testcase("keras_gru_reset_before", factory=keras_model(_rnn("GRU", reset_after=False), (None, 5)),
                 input_shapes=[("B", "T", 5)], static_sizes={"T": 4}, expected_ops=["GRU"], max_nodes=4,
                 run_f64=False),
    ]),
    Component(name="keras.SimpleRNN", onnx=["RNN"], since="v0.1.0", testcases=_cases("SimpleRNN", "RNN")),
    Component(name="keras.text_classifier", onnx=["LSTM", "GRU", "Gather", "Gemm", "Softmax"], since="v0.1.0",
              testcases=[
                  Testcase("keras_bilstm_text_classifier", factory=keras_model(_text_classifier, (7,), dtype=np.int32),
                           input_shapes=[jax.ShapeDtypeStruct(("B", "T"), np.int32)], static_sizes={"T": 7}, input_generator=_tokens,
                           expected_ops=["LSTM", "GRU", "Gemm"], forbidden_ops=["Loop", "Scan"], run_f64=False),
              ]),
]

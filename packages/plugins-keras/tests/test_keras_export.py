"""Keras 3's own ``model.export(path, format="onnx")`` on the JAX backend (it calls ``jax2onnx.to_onnx``
with 0.17's keywords): the file it writes runs in onnxruntime and matches ``model(x, training=False)``
at two batch sizes, for the model shapes users export."""

from __future__ import annotations

import importlib.metadata as metadata

import keras
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from jax2onnx.lower.registry import PluginRegistry, set_registry

#: Keras calls jax2onnx from ``export(format="onnx")`` on the JAX backend since 3.14; older releases
#: convert through TensorFlow and tf2onnx, so there is nothing of ours to test (the pack's layer
#: lowerings, tested in test_testcases.py, still support the declared floor, keras 3.10).
_KERAS_CALLS_JAX2ONNX = tuple(int(p) for p in keras.__version__.split(".")[:2]) >= (3, 14)
pytestmark = pytest.mark.skipif(
    not _KERAS_CALLS_JAX2ONNX,
    reason=f"keras {keras.__version__} exports ONNX through tf2onnx, not jax2onnx (Keras >= 3.14 calls jax2onnx)",
)

L = keras.layers
RNG = np.random.default_rng(0)


def _randomized(model):
    """Non-trivial weights: biases and normalisation offsets are zero in a fresh model."""
    rng = np.random.default_rng(1)
    for v in model.variables:
        low, high = (0.5, 1.5) if "variance" in v.path else (-1.0, 1.0)
        v.assign(rng.uniform(low, high, tuple(v.shape)).astype(v.dtype))
    return model


def _export(model, tmp_path, make_inputs, **kwargs):
    model(make_inputs(1), training=False)  # Keras exports only a model that has been called
    path = tmp_path / "model.onnx"
    model.export(str(path), format="onnx", verbose=False, **kwargs)
    proto = onnx.load(str(path))
    onnx.checker.check_model(proto, full_check=True)
    return proto, ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


def _check(model, proto, session, make_inputs, sizes=(1, 4)):
    names = [i.name for i in proto.graph.input]
    diffs = []
    for size in sizes:
        inputs = make_inputs(size)
        flat = list(inputs.values()) if isinstance(inputs, dict) else list(inputs) if isinstance(inputs, list) else [inputs]
        (got,) = session.run(None, dict(zip(names, flat, strict=True)))
        want = np.asarray(model(inputs, training=False))
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
        diffs.append(float(np.abs(got - want).max()))
    return max(diffs)


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


def _vectors(b):
    return RNG.standard_normal((b, 8)).astype(np.float32)


def _dense_ln_dense():
    model = keras.Sequential([L.Input((8,)), L.Dense(16, activation="relu"), L.LayerNormalization(), L.Dense(4)])
    return _randomized(model)


def test_sequential_dense_layernorm_dense(tmp_path):
    model = _dense_ln_dense()
    proto, session = _export(model, tmp_path, _vectors)
    assert _dims(proto.graph.input[0]) == ["batch", 8]
    _check(model, proto, session, _vectors)
    # With this pack the model is its four layers' ops.
    assert [n.op_type for n in proto.graph.node] == ["Gemm", "Relu", "LayerNormalization", "Gemm"]


def test_functional_model(tmp_path):
    inp = keras.Input((6, 6, 3))
    x = L.Conv2D(4, 3, padding="same", activation="relu")(inp)
    x = L.BatchNormalization()(x)
    x = L.MaxPooling2D()(x)
    x = L.Flatten()(x)
    out = L.Dense(5, activation="softmax")(x)
    model = _randomized(keras.Model(inp, out))
    images = lambda b: RNG.standard_normal((b, 6, 6, 3)).astype(np.float32)  # noqa: E731
    proto, session = _export(model, tmp_path, images)
    _check(model, proto, session, images)


def _two_inputs():
    a, b = L.Input((4,), name="a"), L.Input((6,), name="b")
    merged = L.Concatenate()([L.Dense(5, activation="tanh")(a), b])
    return a, b, L.Dense(3)(merged)


def test_several_inputs_as_a_dict(tmp_path):
    a, b, out = _two_inputs()
    model = _randomized(keras.Model({"a": a, "b": b}, out))
    inputs = lambda n: {"a": RNG.standard_normal((n, 4)).astype(np.float32),  # noqa: E731
                        "b": RNG.standard_normal((n, 6)).astype(np.float32)}
    proto, session = _export(model, tmp_path, inputs)
    assert [i.name for i in proto.graph.input] == ["a", "b"]
    _check(model, proto, session, inputs)


def test_several_inputs_as_a_list(tmp_path):
    a, b, out = _two_inputs()
    model = _randomized(keras.Model([a, b], out))
    inputs = lambda n: [RNG.standard_normal((n, 4)).astype(np.float32),  # noqa: E731
                        RNG.standard_normal((n, 6)).astype(np.float32)]
    proto, session = _export(model, tmp_path, inputs)
    assert [i.name for i in proto.graph.input] == ["a", "b"]
    _check(model, proto, session, inputs)


def test_none_batch_and_none_sequence_length(tmp_path):
    model = _randomized(keras.Sequential([
        L.Input((None, 5)), L.Dense(7, activation="gelu"), L.LayerNormalization(), L.GlobalAveragePooling1D(),
        L.Dense(2),
    ]))
    proto, session = _export(model, tmp_path, lambda b: RNG.standard_normal((b, 3, 5)).astype(np.float32))
    assert _dims(proto.graph.input[0]) == ["batch", "dim_0_1", 5]
    for seq in (3, 7):  # each sequence length at two batch sizes
        _check(model, proto, session, lambda b, seq=seq: RNG.standard_normal((b, seq, 5)).astype(np.float32))


def test_opset_version_is_passed_through(tmp_path):
    model = _dense_ln_dense()
    proto, session = _export(model, tmp_path, _vectors, opset_version=18)
    assert next(o.version for o in proto.opset_import if o.domain == "") == 18
    _check(model, proto, session, _vectors)


@pytest.fixture
def registry_without_keras_pack():
    """Only the packs every JAX export has (lax, jnp): Keras's math as traced."""
    eps = [e for e in metadata.entry_points(group="jax2onnx") if e.dist.name in ("jax2onnx-lax", "jax2onnx-jnp")]
    previous = set_registry(PluginRegistry(entry_points=eps))
    try:
        yield
    finally:
        set_registry(previous)


def test_without_the_pack_the_same_model_is_exact_but_larger(tmp_path, registry_without_keras_pack):
    model = _dense_ln_dense()
    proto, session = _export(model, tmp_path, _vectors)
    _check(model, proto, session, _vectors)
    ops = [n.op_type for n in proto.graph.node]
    assert "LayerNormalization" not in ops and len(ops) > 4


def test_normalization_mode_force_decomposed_keeps_keras_math():
    from jax2onnx import to_onnx

    model = _dense_ln_dense()
    fn = lambda x: model(x, training=False)  # noqa: E731
    native = to_onnx(fn, [("B", 8)])
    decomposed = to_onnx(fn, [("B", 8)], normalization_mode="force_decomposed")
    assert "LayerNormalization" in {n.op_type for n in native.graph.node}
    assert "LayerNormalization" not in {n.op_type for n in decomposed.graph.node}
    session = ort.InferenceSession(decomposed.SerializeToString(), providers=["CPUExecutionProvider"])
    x = _vectors(3)
    (got,) = session.run(None, {decomposed.graph.input[0].name: x})
    np.testing.assert_allclose(got, np.asarray(fn(x)), rtol=1e-4, atol=1e-5)

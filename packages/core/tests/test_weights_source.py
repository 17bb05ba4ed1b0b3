"""Export from abstract parameters and a weight source: the weights are read when the model is
written, one at a time, and never held by the converter."""

from __future__ import annotations

import json
import struct

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import InputSpecError, Weights, allclose, to_onnx
from jax2onnx.export.weights import SafetensorsSource


def write_safetensors(path, tensors: dict[str, np.ndarray]) -> None:
    """A minimal safetensors writer (the format: u64 header length, JSON header, raw bytes)."""
    codes = {np.dtype(np.float32): "F32", np.dtype(np.float64): "F64", np.dtype(np.int32): "I32"}
    header, offset, blobs = {}, 0, []
    for name, arr in tensors.items():
        data = np.ascontiguousarray(arr).tobytes()
        header[name] = {"dtype": codes[arr.dtype], "shape": list(arr.shape), "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
        blobs.append(data)
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for b in blobs:
            f.write(b)


def mlp(params, x):
    for layer in params["layers"]:
        x = jnp.sin(x @ layer["w"] + layer["b"])
    return x


def _params(rng, sizes):
    return {"layers": [{"w": rng.standard_normal((a, b)).astype(np.float32), "b": rng.standard_normal(b).astype(np.float32)}
                       for a, b in zip(sizes, sizes[1:])]}


def _flat(params):
    return {f"layers.{i}.{k}": v for i, layer in enumerate(params["layers"]) for k, v in layer.items()}


def test_export_from_a_safetensors_file(tmp_path, mini_registry):
    rng = np.random.default_rng(0)
    params = _params(rng, [16, 32, 8])
    st = tmp_path / "model.safetensors"
    write_safetensors(st, _flat(params))
    abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)
    out = tmp_path / "model.onnx"
    proto = to_onnx(mlp, [Weights(abstract, str(st)), ("B", 16)], output_path=str(out), external_data=True)
    assert [i.name for i in proto.graph.input] == ["x"], "weights must be initializers, not graph inputs"
    assert {i.name for i in proto.graph.initializer} >= {"layers.0.w", "layers.1.b"}
    x = rng.standard_normal((3, 16)).astype(np.float32)
    assert allclose(lambda x: mlp(params, x), str(out), [x])


def test_input_names_name_the_graph_inputs_not_the_weights(tmp_path, mini_registry):
    """A Weights entry is initializers, so input_names lists only the other inputs (the LLM pack
    names genai's inputs this way)."""
    rng = np.random.default_rng(0)
    params = _params(rng, [16, 8])
    st = tmp_path / "model.safetensors"
    write_safetensors(st, _flat(params))
    abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)
    proto = to_onnx(mlp, [Weights(abstract, str(st)), ("B", 16)], input_names=["tokens"])
    assert [i.name for i in proto.graph.input] == ["tokens"]
    with pytest.raises(InputSpecError, match="input_names has 2 name"):
        to_onnx(mlp, [Weights(abstract, str(st)), ("B", 16)], input_names=["w", "tokens"])


def test_weights_are_read_only_when_written(tmp_path, mini_registry):
    rng = np.random.default_rng(1)
    params = _params(rng, [32, 32])  # the 4 KiB kernel is over the size shape inference leaves out
    flat = _flat(params)
    reads: list[str] = []

    def source(name):
        reads.append(name)
        return flat[name]

    abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)
    out = tmp_path / "m.onnx"
    to_onnx(mlp, [Weights(abstract, source), (2, 32)], output_path=str(out), external_data=True)
    assert not reads or set(reads) == set(flat)
    # the kernel is read once, to write it (the weights file's content digest hashes the written
    # file, not the source a second time); never kept
    assert reads.count("layers.0.w") == 1, reads
    model = onnx.load(str(out))
    assert allclose(lambda x: mlp(params, x), model, [rng.standard_normal((2, 32)).astype(np.float32)])


def test_streamed_weights_are_written_one_at_a_time_at_any_size(tmp_path, mini_registry, monkeypatch):
    """No external_data=: a small model streamed from a source still goes to the weights file, each
    weight read just before it is written (not all read into one proto, then saved)."""
    from jax2onnx.export import saving

    rng = np.random.default_rng(3)
    # every tensor over 1 KiB: all go to the weights file (and shape inference reads none of them early)
    params = _params(rng, [32, 512, 1024])
    flat = _flat(params)
    events: list[str] = []

    def source(name):
        events.append("read")
        return flat[name]

    monkeypatch.setattr(saving, "_STEP_HOOK", lambda step: events.append(step) if step == "writing" else None)
    abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)
    out = tmp_path / "small.onnx"
    to_onnx(mlp, [Weights(abstract, source), ("B", 32)], output_path=str(out))
    assert events == ["writing", "read"] * len(flat), events  # read as each is written, one at a time
    proto = onnx.load(str(out), load_external_data=False)
    external = {t.name for t in proto.graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
    assert external == set(flat)
    # atol 1e-4: onnxruntime 1.31's (the floor's) float32 kernels differ from JAX by up to 4e-5 here
    assert allclose(lambda x: mlp(params, x), str(out), [rng.standard_normal((2, 32)).astype(np.float32)], atol=1e-4)
    # asked for one self-contained file, or no file to write beside: inline, as before
    inline = to_onnx(mlp, [Weights(abstract, flat), ("B", 32)], output_path=str(tmp_path / "one.onnx"),
                     external_data=False)
    assert not any(t.data_location == onnx.TensorProto.EXTERNAL for t in inline.graph.initializer)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("one.onnx")) == ["one.onnx"]
    assert {t.name for t in to_onnx(mlp, [Weights(abstract, flat), ("B", 32)]).graph.initializer} >= set(flat)


def test_a_missing_or_misshapen_weight_is_named(tmp_path, mini_registry):
    params = _params(np.random.default_rng(2), [4, 4])
    st = tmp_path / "w.safetensors"
    write_safetensors(st, {"layers.0.w": params["layers"][0]["w"], "layers.0.bias": params["layers"][0]["b"]})
    abstract = jax.tree_util.tree_map(lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), params)
    with pytest.raises(InputSpecError, match=r"has no tensor 'layers.0.b'; did you mean"):
        to_onnx(mlp, [Weights(abstract, str(st)), (2, 4)], output_path=str(tmp_path / "w.onnx"), external_data=True)
    assert not (tmp_path / "w.onnx").exists(), "a failed export leaves no file"
    bad = {"layers.0.w": np.zeros((4, 5), np.float32), "layers.0.b": params["layers"][0]["b"]}
    with pytest.raises(InputSpecError, match=r"'layers.0.w' from mapping has shape \(4, 5\)"):
        to_onnx(mlp, [Weights(abstract, bad), (2, 4)], output_path=str(tmp_path / "w.onnx"), external_data=True)


def test_safetensors_reader_reads_one_tensor(tmp_path):
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    write_safetensors(tmp_path / "t.safetensors", {"a": a, "b": np.ones(2, np.float64)})
    src = SafetensorsSource(tmp_path / "t.safetensors")
    np.testing.assert_array_equal(src.load("a"), a)
    assert src.load("b").dtype == np.float64

"""One self-contained model file, written tensor by tensor (``saving.save_model_file``): the file is
the message ``ir.to_proto`` gives (``onnx.load`` reads it back equal), whatever the initializers'
kinds and order, it runs, and the export's progress counts its tensors and bytes as they are written."""

from __future__ import annotations

import io
import os

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx import progress, to_onnx
from jax2onnx.export import saving

BIG = (40, 40)  # 6400 bytes as float32: over the 1 KiB under which a tensor stays in the head


def _model_with_every_kind_of_initializer() -> tuple[ir.Model, dict[str, np.ndarray]]:
    """Large and small initializers interleaved (float32, bfloat16, int4, int64, a lazy one, a
    string one, one with a doc string and metadata), each read by a node so the model is valid."""
    rng = np.random.default_rng(0)
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(BIG))
    arrays = {
        "big_a": rng.standard_normal(BIG).astype(np.float32),
        "small_b": rng.standard_normal((2, 40)).astype(np.float32),
        "big_bf16": rng.standard_normal(BIG).astype(ml_dtypes.bfloat16),
        "big_int4": rng.integers(-8, 8, size=(63, 65)).astype(ml_dtypes.int4),  # odd size: packed halves
        "small_shape": np.array([40, 40], dtype=np.int64),
        "big_lazy": rng.standard_normal(BIG).astype(np.float32),
        "big_last": rng.standard_normal(BIG).astype(np.float32),
    }
    values, nodes = {}, []
    for name, array in arrays.items():
        if name == "big_lazy":
            tensor = ir.LazyTensor(lambda a=array: ir.Tensor(a), dtype=ir.DataType.FLOAT, shape=ir.Shape(array.shape))
        else:
            tensor = ir.Tensor(array)
        tensor.name = name
        if name == "big_a":
            tensor.doc_string = "the first weight"
            tensor.metadata_props["origin"] = "test"
        dtype = {"big_bf16": ir.DataType.BFLOAT16, "big_int4": ir.DataType.INT4,
                 "small_shape": ir.DataType.INT64}.get(name, ir.DataType.FLOAT)
        values[name] = ir.Value(name=name, type=ir.TensorType(dtype), shape=ir.Shape(array.shape), const_value=tensor)
    words = ir.StringTensor(np.array([b"a", b"bc"] * 600, dtype=object), name="words")  # 1.8 KB of strings
    values["words"] = ir.Value(name="words", type=ir.TensorType(ir.DataType.STRING), shape=ir.Shape((1200,)),
                               const_value=words)
    out = x
    for name in ("big_a", "big_lazy", "big_last"):
        node = ir.Node("", "Add", [out, values[name]], num_outputs=1)
        nodes.append(node)
        out = node.outputs[0]
        out.type, out.shape = ir.TensorType(ir.DataType.FLOAT), ir.Shape(BIG)
    for name in ("small_b", "big_bf16", "big_int4", "small_shape", "words"):  # read too: no unused initializer
        node = ir.Node("", "Shape", [values[name]], num_outputs=1)
        node.outputs[0].name = f"shape_of_{name}"
        node.outputs[0].type = ir.TensorType(ir.DataType.INT64)
        node.outputs[0].shape = ir.Shape((values[name].shape.rank(),))
        nodes.append(node)
    out.name = "y"
    graph = ir.Graph([x], [out, *(n.outputs[0] for n in nodes[3:])], nodes=nodes,
                     initializers=list(values.values()), opset_imports={"": 23}, name="g")
    return ir.Model(graph, ir_version=11), arrays


def test_the_file_is_the_message_to_proto_gives(tmp_path):
    model, arrays = _model_with_every_kind_of_initializer()
    expected = ir.to_proto(model)
    seen = []
    saving.save_model_file(model, tmp_path / "m.onnx", on_tensor=lambda i, n, nbytes: seen.append((i, n, nbytes)))
    loaded = onnx.load(str(tmp_path / "m.onnx"))
    assert loaded == expected  # field by field: every initializer (bytes, order), value info, doc, metadata
    assert [t.name for t in loaded.graph.initializer] == [*arrays, "words"]
    onnx.checker.check_model(str(tmp_path / "m.onnx"), full_check=True)
    big = [name for name in arrays if name.startswith("big_")]
    sizes = {"big_int4": 63 * 65 // 2 + 1}
    assert seen == [(i, len(big), sizes.get(name, 6400 if name != "big_bf16" else 3200)) for i, name in enumerate(big)]
    assert saving.streamed_bytes(model) == sum(n for _, _, n in seen)
    # the model itself is as it was: its large tensors back in place, not the stand-ins
    assert ir.to_proto(model) == expected and os.listdir(tmp_path) == ["m.onnx"]


def test_a_tensor_that_breaks_mid_write_leaves_no_file(tmp_path):
    model, _ = _model_with_every_kind_of_initializer()

    def broken():
        raise OSError("the weights file went away")

    model.graph.initializers["big_lazy"].const_value = ir.LazyTensor(broken, dtype=ir.DataType.FLOAT, shape=ir.Shape(BIG))
    with pytest.raises(OSError, match="went away"):
        saving.save_model_file(model, tmp_path / "m.onnx")
    assert os.listdir(tmp_path) == []


def test_a_single_file_export_reports_its_tensors_and_bytes(mini_registry, tmp_path):
    """The weights of a model written as one file are counted as they are written, as an
    external-data export's are (was: nothing between the write stage and its end)."""
    rng = np.random.default_rng(2)
    ws = [(rng.standard_normal((64, 64)) * 0.1).astype(np.float32) for _ in range(5)]

    def forward(x):
        for w in ws:
            x = jnp.sin(x @ w)
        return x

    log = io.StringIO()
    with progress.reporting(True, stream=log):
        proto = to_onnx(forward, [("B", 64)], output_path=str(tmp_path / "m.onnx"))
    lines = log.getvalue().splitlines()
    assert f"jax2onnx: writing 5 tensors ({5 * 64 * 64 * 4 / 1024:.1f} KiB)" in lines, lines
    assert f"jax2onnx:   5/5 tensors, {5 * 64 * 64 * 4 / 1024:.1f} KiB of {5 * 64 * 64 * 4 / 1024:.1f} KiB" in lines
    assert not any(name.endswith(".data") for name in os.listdir(tmp_path))  # one file
    assert onnx.load(str(tmp_path / "m.onnx")) == proto
    x = rng.standard_normal((3, 64)).astype(np.float32)
    from jax2onnx import allclose

    assert allclose(forward, str(tmp_path / "m.onnx"), [x])

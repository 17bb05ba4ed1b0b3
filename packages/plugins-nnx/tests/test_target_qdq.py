"""target="qdq" (the NPU form, static QDQ) on an NNX MLP and a small CNN, in onnxruntime's CPU provider.

Structure: onnx.checker's full check, every MatMul/Gemm/Conv between DequantizeLinear and QuantizeLinear
(read here from the graph, not from the target's own check), static shapes everywhere, integer weights
in the chosen form. Accuracy: cosine with the JAX function on held-out inputs, side by side with
onnxruntime's own ``quantize_static`` applied to our float32 export (the anchor: the same activation
and weight types, per channel, min/max calibration on the same batches). Both run with onnxruntime's
graph optimizations off, so each is computed as its graph states (dequantized float math, what an
NPU's integer kernels compute up to rounding): with them on, onnxruntime's CPU fuses uint8 x int8
into a kernel that saturates on AVX2 machines without VNNI (0.98 for both on the MLP), which is the
CPU's and not the graph's error. The margin: our error ``1 - cosine`` at most 1.25x the anchor's plus
1e-6 (measured 0.61x-1.00x of it on these models and types, bench/results/qdq_accuracy.md; the two
choose some scales differently: the anchor shares AveragePool's input scale, we calibrate it)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from flax import nnx
from jax2onnx import Precision, PrecisionError, to_onnx, verify
from jax2onnx.cli import main
from jax2onnx.errors import TargetUnsupportedError
from jax2onnx.verification.precision import MIN_COSINE, cosine

COMPUTE = {"MatMul", "Gemm", "Conv", "ConvTranspose"}


class MLP(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.l1 = nnx.Linear(16, 32, rngs=rngs)
        self.l2 = nnx.Linear(32, 32, rngs=rngs)
        self.l3 = nnx.Linear(32, 8, rngs=rngs)

    def __call__(self, x):
        return self.l3(nnx.relu(self.l2(nnx.relu(self.l1(x)))))


class CNN(nnx.Module):
    """Convolutions, average and max pooling, a residual add, a spatial mean, a dense head and a
    log-softmax (whose exp/log the QDQ form leaves float)."""

    def __init__(self, rngs: nnx.Rngs, log_softmax: bool = False):
        self.c1 = nnx.Conv(3, 8, (3, 3), rngs=rngs)
        self.c2 = nnx.Conv(8, 8, (3, 3), rngs=rngs)
        self.fc = nnx.Linear(8, 4, rngs=rngs)
        self.log_softmax = log_softmax

    def __call__(self, x):
        y = nnx.avg_pool(nnx.relu(self.c1(x)), (2, 2), (2, 2))
        y = nnx.max_pool(nnx.relu(self.c2(y)) + y, (2, 2), (1, 1), padding="SAME")
        out = self.fc(y.mean(axis=(1, 2)))
        return jax.nn.log_softmax(out) if self.log_softmax else out


MODELS = {"mlp": (MLP, (4, 16)), "cnn": (CNN, (2, 8, 8, 3))}


def _session(model: onnx.ModelProto | str) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = model if isinstance(model, str) else model.SerializeToString()
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def _run(model, x: np.ndarray) -> np.ndarray:
    session = _session(model)
    return session.run(None, {session.get_inputs()[0].name: x})[0]


def _unwrapped(model: onnx.ModelProto) -> list[str]:
    """Compute nodes with a float input not made by a DequantizeLinear, or an output read by anything
    but QuantizeLinear (a Relu right after, fused by NPU compilers, counts when its output is quantized)."""
    producers = {o: n for n in model.graph.node for o in n.output}
    readers: dict[str, list[onnx.NodeProto]] = {}
    for n in model.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    ints = {t.name for t in model.graph.initializer if t.data_type != onnx.TensorProto.FLOAT}

    def quantized(name: str) -> bool:
        users = readers.get(name, [])
        if len(users) == 1 and users[0].op_type == "Relu":
            return quantized(users[0].output[0])
        return bool(users) and all(u.op_type == "QuantizeLinear" for u in users)

    bad = []
    for n in model.graph.node:
        if n.op_type in COMPUTE:
            ins = [i for i in n.input if i and i not in ints]
            if not all(i in producers and producers[i].op_type == "DequantizeLinear" for i in ins):
                bad.append(f"{n.name} input")
            if not all(quantized(o) for o in n.output):
                bad.append(f"{n.name} output")
    return bad


def _symbolic(model: onnx.ModelProto) -> list[str]:
    inferred = onnx.shape_inference.infer_shapes(model)
    values = [*inferred.graph.input, *inferred.graph.value_info, *inferred.graph.output]
    return [v.name for v in values
            if not v.type.tensor_type.HasField("shape") or any(not d.HasField("dim_value") for d in v.type.tensor_type.shape.dim)]


@pytest.mark.parametrize(("activations", "weights"), [("uint16", "int8"), ("uint8", "uint8"), ("uint16", "int4")])
@pytest.mark.parametrize("name", list(MODELS))
def test_structure(name, activations, weights):
    make, shape = MODELS[name]
    model = to_onnx(make(nnx.Rngs(0)), [shape], target="qdq", precision=Precision("qdq", activations=activations,
                                                                                   weights=weights))
    onnx.checker.check_model(model, full_check=True)
    ops = [n.op_type for n in model.graph.node]
    assert sum(op in COMPUTE for op in ops) >= 3, ops
    assert _unwrapped(model) == []
    assert _symbolic(model) == []
    assert {i.type.tensor_type.elem_type for i in [*model.graph.input, *model.graph.output]} == {onnx.TensorProto.FLOAT}
    # every weight and kernel is stored in integers: no float initializer of rank 2 or more is left
    scales = {n.input[1] for n in model.graph.node if n.op_type == "DequantizeLinear"}  # int4 blocks' are 2-D
    floats = [t.name for t in model.graph.initializer
              if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) >= 2 and t.name not in scales]
    assert floats == []
    codes = {t.data_type for t in model.graph.initializer if len(t.dims) >= 2 and t.name not in scales}
    want = {"int8": {onnx.TensorProto.INT8}, "uint8": {onnx.TensorProto.UINT8},
            "int4": {onnx.TensorProto.INT4} | ({onnx.TensorProto.INT8} if name == "cnn" else set())}[weights]
    assert codes == want
    act = {"uint16": onnx.TensorProto.UINT16, "uint8": onnx.TensorProto.UINT8}[activations]
    q_types = {t.data_type for n in model.graph.node if n.op_type == "QuantizeLinear"
               for t in model.graph.initializer if t.name == n.input[2]}
    assert q_types == {act}
    if weights == "int4":
        blocked = [n for n in model.graph.node if n.op_type == "DequantizeLinear"
                   and any(a.name == "block_size" for a in n.attribute)]
        assert blocked and model.opset_import[0].version >= 21


@pytest.mark.parametrize(("activations", "weights"), [("uint16", "int8"), ("uint8", "int8"), ("uint8", "uint8")])
@pytest.mark.parametrize("name", list(MODELS))
def test_accuracy_against_quantize_static(tmp_path, name, activations, weights):
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    make, shape = MODELS[name]
    fn = make(nnx.Rngs(0))
    rng = np.random.default_rng(7)
    calibration = [rng.standard_normal(shape).astype(np.float32) for _ in range(8)]
    held_out = rng.standard_normal((8, *shape[1:])).astype(np.float32).reshape(-1, *shape)
    ours = to_onnx(fn, [shape], target="qdq", precision=Precision("qdq", activations=activations, weights=weights,
                                                                  calibration=[[c] for c in calibration]))
    float_path = str(tmp_path / "float.onnx")
    to_onnx(fn, [shape], output_path=float_path)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter({"x": c} for c in calibration)

        def get_next(self):
            return next(self.batches, None)

    anchor_path = str(tmp_path / "anchor.onnx")
    quantize_static(float_path, anchor_path, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type={"uint16": QuantType.QUInt16, "uint8": QuantType.QUInt8}[activations],
                    weight_type={"int8": QuantType.QInt8, "uint8": QuantType.QUInt8}[weights],
                    calibrate_method=CalibrationMethod.MinMax)
    reference = np.concatenate([np.asarray(fn(x)) for x in held_out])
    got = np.concatenate([_run(ours, x) for x in held_out])
    anchor = np.concatenate([_run(anchor_path, x) for x in held_out])
    ours_cos, anchor_cos = cosine(reference, got), cosine(reference, anchor)
    assert ours_cos >= MIN_COSINE[f"qdq {activations}"]
    assert 1 - ours_cos <= 1.25 * (1 - anchor_cos) + 1e-6, f"ours {ours_cos:.6f}, quantize_static {anchor_cos:.6f}"


def test_probe_set_without_calibration_data_and_verify():
    """No calibration data: the export calibrates on its probe set (named in the detail), and verify
    judges the result by the QDQ cosine floor."""
    fn = CNN(nnx.Rngs(1))
    model = to_onnx(fn, [(2, 8, 8, 3)], target="qdq")  # precision= left float32: the target's default QDQ form
    props = {p.key: p.value for p in model.metadata_props}
    assert props["jax2onnx.precision"] == "qdq" and props["jax2onnx.precision.activations"] == "uint16"
    assert "probe set" in props["jax2onnx.precision.detail"]
    report = verify(fn, model, [(2, 8, 8, 3)])
    assert report.precision is not None and report, report.failures()


def test_symbolic_axes_need_a_size():
    fn = MLP(nnx.Rngs(0))
    with pytest.raises(PrecisionError, match=r"input 'x' axis 0 is symbolic \('B'\).*dims=\{'B': \.\.\.\}"):
        to_onnx(fn, [("B", 16)], target="qdq")
    model = to_onnx(fn, [("B", 16)], target="qdq", precision=Precision("qdq", dims={"B": 3}))
    assert _symbolic(model) == [] and _unwrapped(model) == []
    x = np.random.default_rng(0).standard_normal((3, 16)).astype(np.float32)
    assert cosine(np.asarray(fn(x)), _run(model, x)) >= MIN_COSINE["qdq uint16"]


def test_shapes_computed_from_a_fixed_axis_fold_into_constants():
    w = np.random.default_rng(0).standard_normal((12, 8)).astype(np.float32)

    def f(x):  # the broadcast to x's symbolic batch is Shape -> Concat -> Expand in the float graph
        return x @ w + jnp.broadcast_to(jnp.arange(8.0), (x.shape[0], 4, 8)) * jnp.ones((x.shape[0], 1, 1))

    assert {"Shape", "Expand"} <= {n.op_type for n in to_onnx(f, [("B", 4, 12)]).graph.node}
    model = to_onnx(f, [("B", 4, 12)], target="qdq", precision=Precision("qdq", dims={"B": 2}))
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node if n.op_type not in ("QuantizeLinear", "DequantizeLinear")] == [
        "MatMul", "Add"]
    assert _symbolic(model) == [] and _unwrapped(model) == []
    x = np.random.default_rng(1).standard_normal((2, 4, 12)).astype(np.float32)
    assert cosine(np.asarray(f(x)), _run(model, x)) >= MIN_COSINE["qdq uint16"]


def test_targets_and_precisions_refuse_each_other():
    fn = MLP(nnx.Rngs(0))
    with pytest.raises(TargetUnsupportedError, match="precision='qdq'.*target='qdq'"):
        to_onnx(fn, [(2, 16)], precision=Precision("qdq"))
    with pytest.raises(TargetUnsupportedError, match="target='qdq'.*precision='int4' is another"):
        to_onnx(fn, [(2, 16)], target="qdq", precision="int4")
    with pytest.raises(TargetUnsupportedError, match="uint16 needs opset 21"):
        to_onnx(fn, [(2, 16)], target="qdq", opset=19)
    model = to_onnx(fn, [(2, 16)], target="qdq", opset=19, precision=Precision("qdq", activations="uint8"))
    assert _unwrapped(model) == [] and model.opset_import[0].version == 19


def test_check_target_qdq_lists_float_compute_and_explains_ops_left_float(tmp_path, capsys):
    fn = CNN(nnx.Rngs(0), log_softmax=True)
    float_path, qdq_path = str(tmp_path / "float.onnx"), str(tmp_path / "qdq.onnx")
    to_onnx(fn, [(2, 8, 8, 3)], output_path=float_path)
    to_onnx(fn, [(2, 8, 8, 3)], output_path=qdq_path, target="qdq")
    assert len(_unwrapped(onnx.load(float_path))) == 6  # what this file's structure check finds on the float graph
    assert main(["check", "--target", "qdq", float_path]) == 1
    out = capsys.readouterr().out
    assert out.count("is not between DequantizeLinear and QuantizeLinear") == 3  # two Conv, one Gemm
    assert main(["check", "--target", "qdq", qdq_path]) == 0
    notes = [line for line in capsys.readouterr().out.splitlines() if ": note: " in line]
    float_ops = {n.op_type for n in onnx.load(qdq_path).graph.node} - {"QuantizeLinear", "DequantizeLinear"}
    assert notes and all("left float" in line and "NPU" in line or "stays float" in line for line in notes)
    assert any("LogSoftmax x1 left float" in line for line in notes)  # the head's log-softmax: no QDQ form of its own
    assert not any(line.split(": note: ")[1].startswith(("Relu", "Conv", "Gemm")) for line in notes), notes
    assert float_ops >= {"LogSoftmax"}


def test_data_movement_shares_scales_and_activations_are_quantized():
    """Split, Pad, Slice and Concat read and write one scale (exact on integers); Gelu, Softmax and
    Tanh get their own; both outputs stay close to JAX."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 32)).astype(np.float32) / 4

    def f(x):
        h = x @ w
        a, b = jnp.split(h, 2, axis=-1)
        c = jnp.concatenate([jax.nn.gelu(a), jnp.pad(b, ((0, 0), (1, 0)))[:, :16]], axis=-1)
        return jax.nn.softmax(c * 2.0, axis=-1), jnp.tanh(h[:, ::2])

    model = to_onnx(f, [(4, 16)], target="qdq")
    onnx.checker.check_model(model, full_check=True)
    producers = {o: n for n in model.graph.node for o in n.output}
    scale_of = {n.input[0]: n.input[1] for n in model.graph.node if n.op_type == "QuantizeLinear"}
    moved = [n for n in model.graph.node if n.op_type in ("Split", "Pad", "Slice", "Concat")]
    assert {n.op_type for n in moved} == {"Split", "Pad", "Slice", "Concat"}
    for n in moved:
        read = producers[n.input[0]].input[1]  # the DequantizeLinear feeding it: its scale
        assert {scale_of[o] for o in n.output} == {read}, n.name
    for op in ("Gelu", "Softmax", "Tanh"):
        (node,) = [n for n in model.graph.node if n.op_type == op]
        assert producers[node.input[0]].op_type == "DequantizeLinear" and node.output[0] in scale_of, op
    x = rng.standard_normal((4, 16)).astype(np.float32)
    session = _session(model)
    for want, got in zip(f(x), session.run(None, {"x": x}), strict=True):
        assert cosine(np.asarray(want), got) >= 0.9999

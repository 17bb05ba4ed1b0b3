"""``Precision("int4", accuracy_level="auto")``: each MatMulNBits measured at level 4 against level 1
in onnxruntime on its real inputs, level 4 kept only within the bound, the layers kept listed.

Two matmuls with fixed weights read the same input: one plainly, one with one entry per block of
32 scaled 100x (an outlier channel in every block). Level 4 rounds that layer's other entries
coarsely; the check keeps it at level 1 and lets the plain one go to 4. The claim is checked
against the whole exported model: with every MatMulNBits forced to level 4, the outlier output
moves by more than the bound and the plain one by less."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx import Precision, PrecisionError
from jax2onnx.precision import accuracy_levels, apply_precision, parse_precision
from jax2onnx.precision.accuracy_levels import MAX_LEVEL4_ERROR, at_risk, head_check_passes, probe_batches
from jax2onnx.verification.precision import recorded_precision

pytest.importorskip("onnxruntime", reason="int4 quantizes with onnxruntime and the check runs in it")

RNG = np.random.default_rng(0)
W_PLAIN = (RNG.normal(size=(128, 48)) / 11).astype(np.float32)
W_OUTLIER = (RNG.normal(size=(128, 80)) / 11).astype(np.float32)
#: entry 5 of each block of 32 along K 100x the rest
SCALE = np.where(np.arange(128) % 32 == 5, 100.0, 1.0).astype(np.float32)


def two_layers(x):
    return x @ W_PLAIN, (x * SCALE) @ W_OUTLIER


def exported(precision: Precision) -> onnx.ModelProto:
    """``two_layers`` as ONNX (``MatMul(x, plain)``, ``MatMul(Mul(x, scale), outlier)``) in ``precision``."""
    h = onnx.helper
    graph = h.make_graph(
        [h.make_node("MatMul", ["x", "plain"], ["y_plain"]), h.make_node("Mul", ["x", "scale"], ["x_scaled"]),
         h.make_node("MatMul", ["x_scaled", "outlier"], ["y_outlier"])],
        "two_layers", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["B", 128])],
        [h.make_tensor_value_info("y_plain", onnx.TensorProto.FLOAT, ["B", 48]),
         h.make_tensor_value_info("y_outlier", onnx.TensorProto.FLOAT, ["B", 80])],
        [onnx.numpy_helper.from_array(a, name) for a, name in ((W_PLAIN, "plain"), (W_OUTLIER, "outlier"), (SCALE, "scale"))])
    model = ir.from_proto(onnx.shape_inference.infer_shapes(h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])))
    apply_precision(model, parse_precision(precision))
    return ir.serde.serialize_model(model)


def levels(model: onnx.ModelProto) -> dict[str, int]:
    """weight name (its codes are ``<name>_q4``) → accuracy_level."""
    return {n.input[1].removesuffix("_q4"): {a.name: a.i for a in n.attribute}["accuracy_level"]
            for n in model.graph.node if n.op_type == "MatMulNBits"}


def detail(model: onnx.ModelProto) -> str:
    return {p.key: p.value for p in model.metadata_props}["jax2onnx.precision.detail"]


def run(model: onnx.ModelProto, x: np.ndarray) -> list[np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})


def all_at(model: onnx.ModelProto, level: int) -> onnx.ModelProto:
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for n in copy.graph.node:
        for a in n.attribute:
            if n.op_type == "MatMulNBits" and a.name == "accuracy_level":
                a.i = level
    return copy


@pytest.mark.parametrize("data", ["probe", "calibration"])
def test_outlier_layer_keeps_level_1_and_plain_layer_goes_to_4(data):
    calibration = [(RNG.normal(size=(64, 128)).astype(np.float32),)] if data == "calibration" else ()
    model = exported(Precision("int4", calibration=calibration))
    onnx.checker.check_model(model, full_check=True)
    plain, outlier = "plain", "outlier"
    assert levels(model) == {plain: 4, outlier: 1}
    text = detail(model)
    where = "probe set" if data == "probe" else "1 calibration batch(es)"
    assert f"accuracy_level auto on the {where}: 1 MatMulNBits at level 4" in text
    assert f"1 kept at level 1 (level-4 error over {MAX_LEVEL4_ERROR:g}): {outlier} (" in text
    # the report's precision row reads it from the metadata
    assert recorded_precision(model) == ("int4", text) and "head check" not in text  # no embedding: no LM head

    # the whole model in onnxruntime: level 4 everywhere moves the outlier output past the bound
    x = np.random.default_rng(1).normal(size=(32, 128)).astype(np.float32)
    ones, fours = run(all_at(model, 1), x), run(all_at(model, 4), x)
    relative = [np.max(np.linalg.norm(a - b, axis=1) / np.linalg.norm(a, axis=1)) for a, b in zip(ones, fours)]
    assert relative[0] <= MAX_LEVEL4_ERROR < relative[1], relative
    # and the exported model (plain at 4, outlier at 1) stays int4-close to the float function
    for got, want in zip(run(model, x), two_layers(x)):
        cosine = np.sum(got * want) / np.linalg.norm(got) / np.linalg.norm(want)
        assert cosine >= 0.97


def test_fixed_levels_are_written_as_given_and_unknown_ones_refused():
    for level in (1, 4):
        model = exported(Precision("int4", accuracy_level=level))
        assert levels(model) == {"plain": level, "outlier": level} and "accuracy_level auto" not in detail(model)
    for bad in (5, "fast", True):
        with pytest.raises(PrecisionError, match="accuracy_level=.*'auto'") as info:
            parse_precision(Precision("int4", accuracy_level=bad))
        assert "\n" not in str(info.value)


def test_the_standard_form_has_no_accuracy_level_to_choose():
    """The standard form (target="onnx": blocked DequantizeLinear + MatMul) has no MatMulNBits:
    "auto", the default, does nothing there."""
    model = exported(Precision("int4", int4_kernel="DequantizeLinear"))
    assert not levels(model) and "accuracy_level" not in detail(model)
    assert [n.op_type for n in model.graph.node].count("DequantizeLinear") == 2


def test_the_probe_set_follows_the_inputs():
    """Token ids that index a table (through a Cast) are drawn over its rows, an axis written as a
    sum of symbols is their sum, a symbol that leads an input is 1, other integers are 1."""
    h = onnx.helper
    table = onnx.numpy_helper.from_array(np.zeros((37, 4), np.float32), "table")
    graph = h.make_graph(
        [h.make_node("Cast", ["ids"], ["ids64"], to=onnx.TensorProto.INT64),
         h.make_node("Gather", ["table", "ids64"], ["rows"]),
         h.make_node("Cast", ["mask"], ["maskf"], to=onnx.TensorProto.FLOAT)],
        "probe", [h.make_tensor_value_info("ids", onnx.TensorProto.INT32, ["batch", "seq"]),
                  h.make_tensor_value_info("mask", onnx.TensorProto.INT32, ["batch", "seq + past"]),
                  h.make_tensor_value_info("past", onnx.TensorProto.FLOAT, ["batch", 2, "past"])],
        [h.make_tensor_value_info("rows", onnx.TensorProto.FLOAT, None),
         h.make_tensor_value_info("maskf", onnx.TensorProto.FLOAT, None)], [table])
    batches = probe_batches(ir.from_proto(h.make_model(graph)))
    assert len(batches) == accuracy_levels.PROBE_BATCHES
    axis = accuracy_levels.PROBE_AXIS
    ids = np.concatenate([b[0] for b in batches])
    assert batches[0][0].shape == (1, axis) and ids.min() >= 0 and ids.max() < 37 and len(np.unique(ids)) > 10
    assert batches[0][1].shape == (1, 2 * axis) and np.all(batches[0][1] == 1)
    assert batches[0][2].shape == (1, 2, axis) and batches[0][2].dtype == np.float32 and batches[0][2].std() > 0.3


def test_sample_rows_keeps_the_worst_rounded_rows():
    x = np.random.default_rng(0).normal(size=(1000, 64)).astype(np.float32)
    x[[7, 500], 3] = 50.0  # two rows with one large entry
    rows = accuracy_levels.sample_rows(x)
    assert len(rows) == accuracy_levels.MAX_ROWS
    assert sum(np.any(np.all(rows == x[k], axis=1)) for k in (7, 500)) == 2


def test_a_row_is_at_risk_when_level_4_moves_it_by_half_its_margin():
    """The head check's rule: a row whose top two logits are at most twice level 4's largest change
    apart could swap them (a swapped row is always one)."""
    reference = [np.array([[3.0, 1.0, 0.0], [2.0, 1.9, 0.0], [0.0, 5.0, 4.0]], np.float32)]
    # margins 2, 0.1, 1; largest changes 1 (no swap, but one that large could), 0.04 (safe), 0.6 (swapped)
    shift = np.array([[-1.0, 0.5, 0.0], [0.04, 0.0, 0.0], [0.0, -0.6, 0.6]], np.float32)
    assert at_risk(reference, [reference[0] + shift]) == 2
    assert at_risk(reference, [reference[0]]) == 0


def test_the_head_check_refuses_a_moved_argmax_and_more_than_its_share_at_risk():
    rng = np.random.default_rng(0)
    reference = [rng.normal(size=(200, 50)).astype(np.float32) * 10]
    top = np.sort(reference[0], axis=1)
    margin = top[:, -1] - top[:, -2]
    assert head_check_passes(reference, [reference[0] + 1e-6])
    # every entry moved by just under half the smallest margin: no swap possible, none at risk
    assert head_check_passes(reference, [reference[0] + 0.49 * margin.min() * np.sign(rng.normal(size=(200, 50)))])
    # one row's top two swapped
    swapped = reference[0].copy()
    row = int(np.argmin(margin))
    first, second = np.argsort(swapped[row])[-2:][::-1]
    swapped[row, first], swapped[row, second] = swapped[row, second], swapped[row, first]
    assert not head_check_passes(reference, [swapped])
    # 3 rows of 200 (1.5%) at risk, none swapped
    risky = reference[0].copy()
    for k in np.argsort(margin)[:3]:
        risky[k, np.argmax(risky[k])] -= 0.6 * margin[k]  # 0.6 of the margin: no swap, but twice it would
    assert at_risk(reference, [risky]) >= 3 and not head_check_passes(reference, [risky])

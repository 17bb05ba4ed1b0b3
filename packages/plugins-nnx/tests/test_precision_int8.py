"""``precision="int8"`` is weight-only by default: int8 weights, float32 activations. On an NNX
transformer block (d=256) it stays within cosine 0.9999 of the float32 JAX function under both
targets' forms (``DequantizeLinear`` + ``MatMul`` under ``target="onnx"``, 8-bit ``MatMulNBits``
under ``target="onnxruntime"``) where the per-tensor dynamic forms (``activations="dynamic"``)
measure about 0.998; either way the weights take at most 0.27x of float32's bytes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from flax import nnx
from jax2onnx import Precision, to_onnx, verify
from jax2onnx.verification.compare import run_onnx
from jax2onnx.verification.precision import MIN_COSINE, cosine
from jax2onnx_nnx.testcases.models import PreLNTransformerLayer
from onnx import numpy_helper
from precision_checks import cast_feeding_cast, io_types, weight_bytes

SPECS = [("B", 16, 256)]
#: two inputs of the block, from fixed seeds
INPUTS = [np.random.default_rng(seed).standard_normal((2, 16, 256)).astype(np.float32) for seed in (0, 1)]
#: the weight matmuls of the block: query|key|value (one, the kernels concatenated), output projection, fc1, fc2
MATMULS = 4


@pytest.fixture(scope="module")
def block():
    fn = PreLNTransformerLayer(256, 4, 1024, rngs=nnx.Rngs(0))
    return fn, to_onnx(fn, SPECS), [np.asarray(fn(x)) for x in INPUTS]


def _export(fn, target: str, precision) -> onnx.ModelProto:
    model = to_onnx(fn, SPECS, target=target, precision=precision)
    onnx.checker.check_model(model, full_check=True)
    assert io_types(model) == {onnx.TensorProto.FLOAT}
    assert cast_feeding_cast(model) == []
    return model


def _cosines(model: onnx.ModelProto, expected: list[np.ndarray]) -> list[float]:
    return [cosine(want, run_onnx(model, [x])[0]) for x, want in zip(INPUTS, expected)]


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


@pytest.mark.parametrize("target", ["onnx", "onnxruntime"])
def test_weight_only_int8_is_within_0_9999_of_float32(block, target):
    fn, reference, expected = block
    model = _export(fn, target, "int8")
    ops = [n.op_type for n in model.graph.node]
    assert not {"DynamicQuantizeLinear", "MatMulInteger", "DynamicQuantizeMatMul"} & set(ops), ops
    if target == "onnx":
        assert {n.domain for n in model.graph.node} == {""}
        widen = [n for n in model.graph.node if n.op_type == "DequantizeLinear"]
        assert len(widen) == MATMULS and ops.count("MatMul") == MATMULS
        inits = {t.name: t for t in model.graph.initializer}
        for node in widen:  # int8 codes [K, N] with one float32 scale per column
            codes, scales = inits[node.input[0]], inits[node.input[1]]
            assert codes.data_type == onnx.TensorProto.INT8 and _attrs(node)["axis"] == 1
            assert list(scales.dims) == [codes.dims[1]] and len(node.input) == 2  # symmetric: no zero point
    else:
        nbits = [n for n in model.graph.node if n.op_type == "MatMulNBits"]
        assert len(nbits) == MATMULS and "MatMul" not in ops
        for node in nbits:
            attrs = _attrs(node)
            assert attrs["bits"] == 8 and attrs["block_size"] == 128 and attrs["accuracy_level"] == 4
    cosines = _cosines(model, expected)
    assert min(cosines) >= 0.9999, cosines
    ratio = weight_bytes(model) / weight_bytes(reference)
    assert ratio <= 0.27, f"{ratio:.4f} of the float32 bytes"


def test_weight_only_8_bit_blocks_dequantize_to_the_weight(block):
    """8-bit MatMulNBits' codes are symmetric int8 + 128 in blocks of 128 along K, one scale each:
    each weight comes back within half a step of its block's scale."""
    fn, _, _ = block
    model = _export(fn, "onnxruntime", "int8")
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    fc2 = np.asarray(fn.fc2.kernel[...])  # [1024, 256]
    node = next(n for n in model.graph.node if n.op_type == "MatMulNBits" and _attrs(n)["K"] == 1024)
    codes, scales = inits[node.input[1]], inits[node.input[2]]
    assert codes.dtype == np.uint8 and codes.shape == (256, 8, 128) and scales.shape == (256, 8)
    assert codes.min() >= 1  # -127..127 (+128): symmetric
    widened = ((codes.astype(np.float32) - 128) * scales[:, :, None]).reshape(256, 1024).T
    assert np.abs(widened - fc2).max() <= 0.5 * scales.max() * (1 + 1e-5)
    np.testing.assert_allclose(np.abs(fc2).reshape(8, 128, 256).max(axis=1).T / 127, scales, rtol=1e-6)


@pytest.mark.parametrize(("target", "kernel"), [("onnx", "MatMulInteger"), ("onnxruntime", "DynamicQuantizeMatMul")])
def test_dynamic_activations_are_the_option_and_report_their_floor(block, target, kernel):
    """``activations="dynamic"`` writes the target's dynamic form; verify judges it by its own floor
    and reports its cosine, which is below the weight-only default's on the same inputs."""
    fn, reference, expected = block
    model = _export(fn, target, Precision("int8", activations="dynamic"))
    ops = [n.op_type for n in model.graph.node]
    assert ops.count(kernel) == MATMULS and "MatMulNBits" not in ops and "DequantizeLinear" not in ops
    assert weight_bytes(model) / weight_bytes(reference) <= 0.27
    props = {p.key: p.value for p in model.metadata_props}
    assert props["jax2onnx.precision.activations"] == "dynamic"
    assert "dynamic activations" in props["jax2onnx.precision.detail"]
    report = verify(fn, model, SPECS)
    assert report, report.failures()
    assert report.precision.kind == "int8"
    assert [o.min_cosine for o in report.precision.outputs] == [MIN_COSINE["int8 dynamic"]]
    assert "(floor 0.99)" in " ".join(" ".join(row) for row in report.precision.rows(str))
    dynamic = _cosines(model, expected)
    weight_only = _cosines(_export(fn, target, "int8"), expected)
    assert all(d < w for d, w in zip(dynamic, weight_only)), (dynamic, weight_only)
    assert min(dynamic) >= MIN_COSINE["int8 dynamic"], dynamic


def test_a_dynamic_kernel_named_implies_dynamic_activations(block):
    fn, _, _ = block
    model = _export(fn, "onnxruntime", Precision("int8", int8_kernel="MatMulInteger"))
    assert [n.op_type for n in model.graph.node].count("MatMulInteger") == MATMULS
    assert {p.key: p.value for p in model.metadata_props}["jax2onnx.precision.activations"] == "dynamic"
    standard = _export(fn, "onnxruntime", Precision("int8", int8_kernel="DequantizeLinear"))
    ops = [n.op_type for n in standard.graph.node]
    assert ops.count("DequantizeLinear") == MATMULS and "MatMulNBits" not in ops
    assert "jax2onnx.precision.activations" not in {p.key for p in standard.metadata_props}
    report = verify(fn, standard, SPECS)
    assert report and [o.min_cosine for o in report.precision.outputs] == [MIN_COSINE["int8"]], report.failures()


def test_int4_takes_the_activation_option_for_its_int8_matmuls(block):
    """Under int4, ``activations=`` applies to the weights ``int8=`` patterns keep int8."""
    fn, _, expected = block
    weight_only = _export(fn, "onnxruntime", Precision("int4", int8=["*"]))
    assert sorted({_attrs(n)["bits"] for n in weight_only.graph.node if n.op_type == "MatMulNBits"}) == [8]
    dynamic = _export(fn, "onnxruntime", Precision("int4", int8=["*"], activations="dynamic"))
    ops = [n.op_type for n in dynamic.graph.node]
    assert ops.count("DynamicQuantizeMatMul") == MATMULS and "MatMulNBits" not in ops
    assert min(_cosines(dynamic, expected)) >= MIN_COSINE["int8 dynamic"]

"""int4 stacked expert weights (precision/expert_weights.py), on hand-built graphs run in onnxruntime:

- ``com.microsoft.MoE`` becomes ``QMoE``, whose output equals the float ``MoE`` run on the weights
  those int4 blocks decode to (the packing, scales and zero points are read as written), and stays
  close to the float32 op;
- an ``Einsum`` reading a stacked ``[E, K, N]`` weight (the library's dense expert bank) reads it
  through one blocked ``DequantizeLinear``, equal to the einsum over the decoded weight;
- an attention projection's ``[hidden, heads, head]`` kernel is no expert weight and stays float32.
"""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx import Precision, PrecisionError
from jax2onnx.precision import apply_precision
from onnx import TensorProto, helper, numpy_helper

ort = pytest.importorskip("onnxruntime", reason="onnxruntime runs the quantized ops (and quantizes int4 blocks)")

E, H, INTER, K, T = 4, 64, 32, 2, 7
MS = "com.microsoft"


def _model(nodes, inputs, output_shape, inits) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, output_shape)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)])


def _run(model: onnx.ModelProto, feeds: dict) -> np.ndarray:
    onnx.checker.check_model(model, full_check=True)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


def _quantized(model: onnx.ModelProto, p: Precision):
    """The precision stage as an export runs it (the rewrite, then dead code removed), and its record."""
    ir_model = ir.from_proto(model)
    apply_precision(ir_model, p)
    return ir.to_proto(ir_model), ir_model.metadata_props["jax2onnx.precision.detail"]


def _init(proto: onnx.ModelProto, name: str) -> np.ndarray:
    return numpy_helper.to_array(next(t for t in proto.graph.initializer if t.name == name))


def _decoded(codes: np.ndarray, scales: np.ndarray, zero_points: np.ndarray | None, block: int) -> np.ndarray:
    """QMoE's int4 weights ``[E, N, K/2]`` (two codes a byte, low nibble first) back to float32 ``[E, N, K]``."""
    experts, n, half = codes.shape
    nibbles = np.stack([codes & 15, codes >> 4], axis=-1).reshape(experts, n, 2 * half).astype(np.float32)
    blocks = scales.shape[-1]
    if zero_points is None:
        zp = np.full((experts, n, blocks), 8.0, np.float32)
    else:
        zp = np.stack([zero_points & 15, zero_points >> 4], axis=-1).reshape(experts, n, -1)[..., :blocks]
    grouped = nibbles.reshape(experts, n, blocks, block) - zp[..., None].astype(np.float32)
    return (grouped * scales[..., None]).reshape(experts, n, 2 * half).astype(np.float32)


@pytest.mark.parametrize("symmetric", [False, True])
def test_moe_becomes_qmoe_with_per_expert_int4_blocks(symmetric):
    rng = np.random.default_rng(0)
    fc1 = rng.standard_normal((E, 2 * INTER, H)).astype(np.float32) * 0.2  # interleaved gate/up rows
    fc2 = rng.standard_normal((E, H, INTER)).astype(np.float32) * 0.2
    attrs = dict(k=K, activation_type="swiglu", swiglu_fusion=1, normalize_routing_weights=1)
    node = helper.make_node("MoE", ["x", "r", "fc1", "", "fc2", ""], ["y"], domain=MS, **attrs)
    inputs = [("x", [None, H]), ("r", [None, E])]
    model = _model([node], inputs, [None, H], {"fc1": fc1, "fc2": fc2})
    feeds = {"x": rng.standard_normal((T, H)).astype(np.float32), "r": rng.standard_normal((T, E)).astype(np.float32)}
    expected = _run(model, feeds)

    block = 32
    quantized, result = _quantized(model, Precision("int4", block_size=block, symmetric=symmetric))
    ops = [(n.domain, n.op_type) for n in quantized.graph.node]
    assert ops.count((MS, "QMoE")) == 1 and (MS, "MoE") not in ops, ops
    assert "1 stacked expert weight(s) int4 per expert: fc1 (QMoE)" in result, result
    qmoe = next(n for n in quantized.graph.node if n.op_type == "QMoE")
    attributes = {a.name: helper.get_attribute_value(a) for a in qmoe.attribute}
    assert attributes["expert_weight_bits"] == 4 and attributes["block_size"] == block
    assert attributes["k"] == K and attributes["normalize_routing_weights"] == 1
    assert not {t.name for t in quantized.graph.initializer} & {"fc1", "fc2"}  # no float32 copy left
    got = _run(quantized, feeds)

    decoded = []
    for w_slot, s_slot, z_slot in ((2, 3, 11), (5, 6, 12)):
        zp = None if symmetric else _init(quantized, qmoe.input[z_slot])
        decoded.append(_decoded(_init(quantized, qmoe.input[w_slot]), _init(quantized, qmoe.input[s_slot]), zp, block))
    reference = _model([node], inputs, [None, H], {"fc1": decoded[0], "fc2": decoded[1]})
    np.testing.assert_allclose(got, _run(reference, feeds), rtol=1e-4, atol=1e-4)
    # the decoded weights are the float ones to int4 precision (a block's step is max|w| / 7.5 or less)
    assert np.abs(decoded[0] - fc1).max() <= np.abs(fc1).max() / 7
    cos = float((got * expected).sum() / np.linalg.norm(got) / np.linalg.norm(expected))
    assert cos > 0.98, cos


def test_moe_with_no_fitting_block_stays_float32():
    """QMoE needs a block (16 at least) dividing both sizes: an intermediate size of 24 has none
    of 32 or 16, so the op stays MoE, and the result says why; with nothing else to quantize the
    export is refused in one line naming the fix."""
    rng = np.random.default_rng(1)
    inter = 24
    fc1 = rng.standard_normal((E, 2 * inter, H)).astype(np.float32)
    fc2 = rng.standard_normal((E, H, inter)).astype(np.float32)
    side = [helper.make_node("MoE", ["x", "r", "fc1", "", "fc2", ""], ["moe"], domain=MS, k=K,
                             activation_type="swiglu", swiglu_fusion=1),
            helper.make_node("MatMul", ["x", "w"], ["dense"]), helper.make_node("Add", ["moe", "dense"], ["y"])]
    model = _model(side, [("x", [None, H]), ("r", [None, E])], [None, H],
                   {"fc1": fc1, "fc2": fc2, "w": rng.standard_normal((H, H)).astype(np.float32)})
    quantized, result = _quantized(model, Precision("int4"))
    assert [n.op_type for n in quantized.graph.node].count("MoE") == 1
    assert "1 MoE op(s) float32" in result and "QMoE needs" in result, result
    alone = _model(side[:1], [("x", [None, H]), ("r", [None, E])], [None, H], {"fc1": fc1, "fc2": fc2})
    alone.graph.output[0].name = "moe"
    with pytest.raises(PrecisionError, match="whose sizes no int4 block of 16 or more divides"):
        _quantized(alone, Precision("int4"))


def test_stacked_einsum_weight_reads_through_blocked_dequantize():
    rng = np.random.default_rng(2)
    w = rng.standard_normal((E, H, INTER)).astype(np.float32)
    kernel = rng.standard_normal((H, 2, 16)).astype(np.float32)  # an attention projection's kernel
    nodes = [helper.make_node("Einsum", ["x", "w"], ["y"], equation="th,ehm->etm"),
             helper.make_node("Einsum", ["x", "kernel"], ["q"], equation="th,hnd->tnd")]
    model = _model(nodes, [("x", [None, H])], [E, None, INTER], {"w": w, "kernel": kernel})
    model.graph.output.append(helper.make_tensor_value_info("q", TensorProto.FLOAT, [None, 2, 16]))
    x = rng.standard_normal((T, H)).astype(np.float32)
    quantized, result = _quantized(model, Precision("int4", block_size=16))
    assert "1 stacked expert weight(s) int4 per expert: w" in result, result
    dq = [n for n in quantized.graph.node if n.op_type == "DequantizeLinear"]
    assert len(dq) == 1 and {a.name: helper.get_attribute_value(a) for a in dq[0].attribute} == {
        "axis": 1, "block_size": 16}
    assert "kernel" in {t.name for t in quantized.graph.initializer}  # the projection stays float32
    codes, scales, zero_points = (_init(quantized, name).astype(np.float32) for name in dq[0].input)
    assert codes.shape == (E, H, INTER) and scales.shape == (E, H // 16, INTER) and codes.max() <= 15
    decoded = (codes - np.repeat(zero_points, 16, axis=1)) * np.repeat(scales, 16, axis=1)
    got = _run(quantized, {"x": x})
    np.testing.assert_allclose(got, np.einsum("th,ehm->etm", x, decoded), rtol=1e-4, atol=1e-3)
    assert np.abs(decoded - w).max() <= np.abs(w).max() / 7


def test_int8_moe_becomes_8_bit_qmoe_and_stacked_einsum_int8():
    """Under int8 the experts are 8-bit: ``QMoE`` with ``expert_weight_bits=8`` (uint8 codes, one
    scale per expert row, zero point 128) equal to ``MoE`` over the decoded weights, and a stacked
    einsum weight int8 with one scale per expert and column."""
    rng = np.random.default_rng(3)
    fc1 = rng.standard_normal((E, 2 * INTER, H)).astype(np.float32) * 0.2
    fc2 = rng.standard_normal((E, H, INTER)).astype(np.float32) * 0.2
    node = helper.make_node("MoE", ["x", "r", "fc1", "", "fc2", ""], ["y"], domain=MS, k=K,
                            activation_type="swiglu", swiglu_fusion=1, normalize_routing_weights=1)
    inputs = [("x", [None, H]), ("r", [None, E])]
    model = _model([node], inputs, [None, H], {"fc1": fc1, "fc2": fc2})
    feeds = {"x": rng.standard_normal((T, H)).astype(np.float32), "r": rng.standard_normal((T, E)).astype(np.float32)}
    quantized, result = _quantized(model, Precision("int8"))
    assert "1 stacked expert weight(s) int8 per expert: fc1 (QMoE)" in result, result
    qmoe = next(n for n in quantized.graph.node if n.op_type == "QMoE")
    attributes = {a.name: helper.get_attribute_value(a) for a in qmoe.attribute}
    assert attributes["expert_weight_bits"] == 8 and "block_size" not in attributes
    decoded = [(_init(quantized, qmoe.input[w]).astype(np.float32) - 128) * _init(quantized, qmoe.input[s])[..., None]
               for w, s in ((2, 3), (5, 6))]
    assert _init(quantized, qmoe.input[2]).dtype == np.uint8 and np.abs(decoded[0] - fc1).max() <= np.abs(fc1).max() / 100
    reference = _model([node], inputs, [None, H], {"fc1": decoded[0].astype(np.float32),
                                                   "fc2": decoded[1].astype(np.float32)})
    np.testing.assert_allclose(_run(quantized, feeds), _run(reference, feeds), rtol=1e-4, atol=1e-4)

    w = rng.standard_normal((E, H, INTER)).astype(np.float32)
    stacked = _model([helper.make_node("Einsum", ["x", "w"], ["y"], equation="th,ehm->etm")], [("x", [None, H])],
                     [E, None, INTER], {"w": w})
    quantized, result = _quantized(stacked, Precision("int8"))
    assert "1 stacked expert weight(s) int8 per expert: w" in result, result
    dq = next(n for n in quantized.graph.node if n.op_type == "DequantizeLinear")
    codes, scales = _init(quantized, dq.input[0]), _init(quantized, dq.input[1])
    assert codes.dtype == np.int8 and scales.shape == (E, 1, INTER)
    x = feeds["x"]
    np.testing.assert_allclose(_run(quantized, {"x": x}), np.einsum("th,ehm->etm", x, codes * scales),
                               rtol=1e-4, atol=1e-3)

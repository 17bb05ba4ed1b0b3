"""The projections' packing (packed_projections.py) on a hand-built attention + gated-MLP graph:
the packed graph passes the full check and computes what the unpacked one does in onnxruntime, and
a group that cannot share one op is left alone with the reason. The exported models' node counts
are checked in test_precision_llm.py (assert_packed_projections), on exports those tests make anyway."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx_llm.packed_projections import PackedProjectionsPass
from onnx import TensorProto, helper

HIDDEN, HEADS, KV_HEADS, HEAD, FFN, CACHE = 32, 4, 2, 8, 48, 16


def _graph(query_is_output: bool = False) -> onnx.ModelProto:
    rng = np.random.default_rng(0)

    def weight(name, cols):
        return helper.make_tensor(name, TensorProto.FLOAT, [HIDDEN if name != "wd" else FFN, cols],
                                  rng.standard_normal((HIDDEN if name != "wd" else FFN, cols)).astype(np.float32).ravel())

    inits = [weight("wq", HEADS * HEAD), weight("wk", KV_HEADS * HEAD), weight("wv", KV_HEADS * HEAD),
             weight("wo", HIDDEN), weight("wg", FFN), weight("wu", FFN), weight("wd", HIDDEN)]
    cache = ["batch", KV_HEADS, CACHE, HEAD]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", HIDDEN]),
              helper.make_tensor_value_info("past_k", TensorProto.FLOAT, cache),
              helper.make_tensor_value_info("past_v", TensorProto.FLOAT, cache),
              helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, ["batch"]),
              helper.make_tensor_value_info("total", TensorProto.INT32, [])]
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("MatMul", ["x", "wv"], ["v"]),
        helper.make_node("GroupQueryAttention", ["q", "k", "v", "past_k", "past_v", "seqlens_k", "total"],
                         ["attn", "present_k", "present_v"], domain="com.microsoft", num_heads=HEADS,
                         kv_num_heads=KV_HEADS),
        helper.make_node("MatMul", ["attn", "wo"], ["o"]),
        helper.make_node("MatMul", ["o", "wg"], ["gate"]),
        helper.make_node("MatMul", ["o", "wu"], ["up"]),
        helper.make_node("Sigmoid", ["gate"], ["sig"]),
        helper.make_node("Mul", ["gate", "sig"], ["act"]),
        helper.make_node("Mul", ["act", "up"], ["hidden"]),
        helper.make_node("MatMul", ["hidden", "wd"], ["y"]),
    ]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", HIDDEN]),
               helper.make_tensor_value_info("present_k", TensorProto.FLOAT, cache),
               helper.make_tensor_value_info("present_v", TensorProto.FLOAT, cache)]
    if query_is_output:
        outputs.append(helper.make_tensor_value_info("q", TensorProto.FLOAT, ["batch", "seq", HEADS * HEAD]))
    # the attention's output shape (onnx's shape inference does not know the contrib op)
    known = [helper.make_tensor_value_info("attn", TensorProto.FLOAT, ["batch", "seq", HIDDEN])]
    graph = helper.make_graph(nodes, "layer", inputs, outputs, inits, value_info=known)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    return onnx.shape_inference.infer_shapes(model)


def _packed(model: onnx.ModelProto) -> tuple[onnx.ModelProto, PackedProjectionsPass, ir.Model]:
    pass_ = PackedProjectionsPass()
    packed = ir.from_proto(model)
    pass_(packed)
    return ir.to_proto(packed), pass_, packed


def _run(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_packing_keeps_the_function_and_writes_one_matmul_per_group():
    model = _graph()
    packed, _, _ = _packed(model)
    onnx.checker.check_model(packed, full_check=True)
    ops = [n.op_type for n in packed.graph.node]
    assert ops.count("MatMul") == 4 and ops.count("Split") == 1, ops  # qkv, out, gate|up, down
    gqa = next(n for n in packed.graph.node if n.op_type == "GroupQueryAttention")
    assert list(gqa.input[1:3]) == ["", ""]
    names = {i.name for i in packed.graph.initializer}
    assert {"wq+wk+wv", "wg+wu"} <= names and not names & {"wq", "wk", "wv", "wg", "wu"}, names
    rng = np.random.default_rng(1)
    for past, seq in ((0, 3), (5, 1)):  # a prefill and a decode step
        feeds = {"x": rng.standard_normal((2, seq, HIDDEN)).astype(np.float32),
                 "past_k": rng.standard_normal((2, KV_HEADS, CACHE, HEAD)).astype(np.float32),
                 "past_v": rng.standard_normal((2, KV_HEADS, CACHE, HEAD)).astype(np.float32),
                 "seqlens_k": np.full(2, past + seq - 1, np.int32), "total": np.array(past + seq, np.int32)}
        for want, got in zip(_run(model, feeds), _run(packed, feeds), strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_group_that_cannot_share_one_op_is_left_with_its_reason():
    """The query projection is also a graph output: q/k/v stay three matmuls (neither the packed
    query nor a Split may take it), and explain() says why; gate/up still pack."""
    packed, pass_, ir_model = _packed(_graph(query_is_output=True))
    gqa = next(n for n in packed.graph.node if n.op_type == "GroupQueryAttention")
    assert list(gqa.input[:3]) == ["q", "k", "v"]
    assert [n.op_type for n in packed.graph.node].count("MatMul") == 6  # q, k, v, out, gate|up, down
    reasons = [str(m) for m in pass_.explain(ir_model)]
    assert any("packed_qkv" in r and "readers besides the attention" in r for r in reasons), reasons
    assert any("packed_siblings" in r and "graph output" in r for r in reasons), reasons

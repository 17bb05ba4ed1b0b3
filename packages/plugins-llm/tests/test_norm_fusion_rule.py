"""The residual RMS-norm fusion as a rule (``jax2onnx.rewrite``): it fires on ``RMSNormalization(a +
b)`` of two (batch, sequence, hidden) values, records itself on the fused node, counts itself in the
model's rewrites, keeps onnxruntime's numbers, and says why it leaves a norm of a broadcast sum."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from jax2onnx.rewrite import RULE_KEY
from jax2onnx_llm.norm_fusion import NORM_OP, RmsNormFusionPass
from onnx import TensorProto, helper, numpy_helper

HIDDEN = 8


def _residual_norm(b_shape: list[int]) -> onnx.ModelProto:
    scale = numpy_helper.from_array(np.linspace(0.5, 1.5, HIDDEN).astype(np.float32), "scale")
    nodes = [helper.make_node("Add", ["a", "b"], ["s"], name="residual"),
             helper.make_node("RMSNormalization", ["s", "scale"], ["y"], name="norm", axis=-1, epsilon=1e-5)]
    graph = helper.make_graph(
        nodes, "block",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3, HIDDEN]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, b_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, HIDDEN]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 3, HIDDEN])],
        initializer=[scale],
        value_info=[helper.make_tensor_value_info("s", TensorProto.FLOAT, [2, 3, HIDDEN])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def test_the_fusion_records_its_rule_and_keeps_the_numbers():
    rng = np.random.default_rng(0)
    feeds = {"a": rng.standard_normal((2, 3, HIDDEN)).astype(np.float32),
             "b": rng.standard_normal((2, 3, HIDDEN)).astype(np.float32)}
    proto = _residual_norm([2, 3, HIDDEN])
    # the residual sum is a graph output too: the rule's condition keeps that norm as it is
    (found,) = RmsNormFusionPass().explain(ir.from_proto(proto))
    assert str(found) == "llm_norms/skip_simplified_layer_norm at RMSNormalization 'norm': the sum 's' (computed by " \
                         "Add 'residual') is a graph output"
    del proto.graph.output[1]
    model = ir.from_proto(proto)
    assert RmsNormFusionPass()(model).modified
    assert {n.op_type: n.metadata_props.get(RULE_KEY) for n in model.graph} == {
        NORM_OP: "llm_norms/skip_simplified_layer_norm"}
    assert json.loads(model.metadata_props["jax2onnx:rewrites"]) == {"skip_simplified_layer_norm": 1}
    (want,) = _run(proto, feeds)
    (got,) = _run(ir.to_proto(model), feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_broadcast_sum_is_left_and_explained():
    proto = _residual_norm([1, 1, HIDDEN])
    del proto.graph.output[1]
    model = ir.from_proto(proto)
    (found,) = RmsNormFusionPass().explain(model)
    assert found.reason == "the Add 'residual' does not sum two (batch, sequence, hidden) values of its shape"
    assert not RmsNormFusionPass()(model).modified
    assert [n.op_type for n in model.graph] == ["Add", "RMSNormalization"]


@pytest.mark.parametrize("bias_read_apart", [False, True])
def test_a_biased_residual_gives_the_op_its_bias(bias_read_apart):
    """``a + (b + bias)`` (a projection's bias added before the residual): one fused node with the
    bias as its fourth input; the sum's other reader (the next residual) reads the op's sum output.
    A bias sum read apart too stays, and is the op's skip input."""
    rng = np.random.default_rng(1)
    bias = numpy_helper.from_array(rng.standard_normal(HIDDEN).astype(np.float32), "bias")
    scale = numpy_helper.from_array(np.linspace(0.5, 1.5, HIDDEN).astype(np.float32), "scale")
    nodes = [helper.make_node("Add", ["b", "bias"], ["biased"], name="projection_bias"),
             helper.make_node("Add", ["biased", "a"], ["s"], name="residual"),
             helper.make_node("RMSNormalization", ["s", "scale"], ["n"], name="norm", epsilon=1e-5),
             helper.make_node("Add", ["s", "n"], ["y"], name="next_residual")]
    spec = [2, 3, HIDDEN]
    outputs = ["y", "biased"] if bias_read_apart else ["y"]
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info(n, TensorProto.FLOAT, spec) for n in ("a", "b")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, spec) for n in outputs], initializer=[bias, scale],
        value_info=[helper.make_tensor_value_info(n, TensorProto.FLOAT, spec) for n in ("biased", "s", "n")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    model = ir.from_proto(proto)
    assert RmsNormFusionPass()(model).modified
    fused = next(n for n in model.graph if n.op_type == NORM_OP)
    if bias_read_apart:
        assert [n.op_type for n in model.graph] == ["Add", NORM_OP, "Add"]
        assert [v.name for v in fused.inputs] == ["biased", "a", "scale"]
    else:
        assert [n.op_type for n in model.graph] == [NORM_OP, "Add"]
        assert [v.name for v in fused.inputs] == ["a", "b", "scale", "bias"]
    feeds = {n: rng.standard_normal(spec).astype(np.float32) for n in ("a", "b")}
    onnx.checker.check_model(ir.to_proto(model), full_check=True)
    want = _run(proto, feeds)
    got = _run(ir.to_proto(model), feeds)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)

"""The rewrite stage's bias-add family (every target) and onnxruntime family (target="onnxruntime")
on hand-written graphs: each rewrite keeps the outputs in onnxruntime, and the forms it must leave
alone stay."""

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from jax2onnx.passes import DeadCodeEliminationPass, RewritePass
from jax2onnx.passes.rewrite import rewrites_applied
from jax2onnx.targets import get_target
from onnx import helper

F = onnx.TensorProto.FLOAT
N = helper.make_node
RNG = np.random.default_rng(0)


def _t(name, shape):
    return helper.make_tensor(name, F, shape, RNG.standard_normal(shape).astype(np.float32).ravel())


def _run(proto, feeds):
    onnx.checker.check_model(proto, full_check=True)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _rewritten(proto, target):
    # the rules read ranks and widths; an exported graph has them from the builder, a hand-written one
    # from shape inference
    model = ir.from_proto(onnx.shape_inference.infer_shapes(proto))
    RewritePass(get_target(target))(model)
    DeadCodeEliminationPass()(model)
    return model, ir.to_proto(model)


def _same(proto, target, feeds):
    model, after = _rewritten(proto, target)
    for got, want in zip(_run(after, feeds), _run(proto, feeds)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    return model


def _model(nodes, inputs, outputs, inits, opset=23):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, F, s) for n, s in outputs], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_matmul_bias_on_matrices_is_one_gemm_and_higher_ranks_stay():
    proto = _model([N("MatMul", ["x", "w"], ["m"]), N("Add", ["m", "b"], ["y"])], [("x", ["B", 4])], [("y", ["B", 3])],
                   [_t("w", [4, 3]), _t("b", [3])])
    model = _same(proto, "onnx", {"x": RNG.standard_normal((5, 4)).astype(np.float32)})
    assert [n.op_type for n in model.graph] == ["Gemm"] and rewrites_applied(model) == {"matmul_bias_gemm": 1}
    proto = _model([N("MatMul", ["x", "w"], ["m"]), N("Add", ["m", "b"], ["y"])], [("x", ["B", 2, 4])],
                   [("y", ["B", 2, 3])], [_t("w", [4, 3]), _t("b", [3])])
    model, _ = _rewritten(proto, "onnxruntime")
    assert [n.op_type for n in model.graph] == ["MatMul", "Add"]


def _residual_block(read_sum_on: bool):
    nodes = [N("MatMul", ["x", "w"], ["m"]), N("Add", ["m", "b"], ["mb"]), N("Add", ["mb", "r"], ["s"]),
             N("LayerNormalization", ["s", "g", "be"], ["y"], axis=-1, epsilon=1e-6)]
    outputs = [("y", ["B", 3, 4])] + ([("s", ["B", 3, 4])] if read_sum_on else [])
    return _model(nodes, [("x", ["B", 3, 4]), ("r", ["B", 3, 4])], outputs,
                  [_t("w", [4, 4]), _t("b", [4]), _t("g", [4]), _t("be", [4])])


def _session_ops(proto, tmp_path):
    """The op types onnxruntime runs after its own graph optimizations (default session options)."""
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    options.log_severity_level = 3
    ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]


def test_residual_sum_keeps_onnxruntime_from_fusing_the_slower_skip_layer_norm(tmp_path):
    # a residual connection read by the norm alone (BERT) and one read on (a pre-LN residual stream)
    feeds = {k: RNG.standard_normal((2, 3, 4)).astype(np.float32) for k in ("x", "r")}
    for read_on in (False, True):
        proto = _residual_block(read_on)
        model = _same(proto, "onnxruntime", feeds)
        ops = [(n.domain, n.op_type) for n in model.graph]
        assert ops == [("", "MatMul"), ("", "Add"), ("", "Sum"), ("", "LayerNormalization")], ops
        assert rewrites_applied(model) == {"residual_sum": 1}
        assert "com.microsoft" not in model.opset_imports  # no contrib op, no contrib domain
        after = ir.to_proto(model)
        assert "SkipLayerNormalization" not in _session_ops(after, tmp_path)
    # the standard form, static shapes: onnxruntime's own optimizer fuses it (what the rule avoids)
    static = onnx.shape_inference.infer_shapes(_model(_residual_block(False).graph.node, [("x", [2, 3, 4]), ("r", [2, 3, 4])],
                                                      [("y", [2, 3, 4])], list(_residual_block(False).graph.initializer)))
    assert "SkipLayerNormalization" in _session_ops(static, tmp_path)
    model, _ = _rewritten(static, "onnxruntime")
    assert "SkipLayerNormalization" not in _session_ops(ir.to_proto(model), tmp_path)
    # a norm of a biased value (a constant operand) is no residual: left alone; generic: no Sum
    proto = _model([N("Add", ["x", "b"], ["s"]), N("LayerNormalization", ["s", "g", "be"], ["y"], axis=-1)],
                   [("x", ["B", 3, 4])], [("y", ["B", 3, 4])], [_t("b", [4]), _t("g", [4]), _t("be", [4])])
    assert [n.op_type for n in _rewritten(proto, "onnxruntime")[0].graph] == ["Add", "LayerNormalization"]
    assert "Sum" not in [n.op_type for n in _rewritten(_residual_block(False), "onnx")[0].graph]


def test_bias_gelu_and_fast_gelu():
    for approximate, op in (("none", "BiasGelu"), ("tanh", "FastGelu")):
        proto = _model([N("MatMul", ["x", "w"], ["m"]), N("Add", ["m", "b"], ["h"]),
                        N("Gelu", ["h"], ["y"], approximate=approximate)],
                       [("x", ["B", 3, 4])], [("y", ["B", 3, 8])], [_t("w", [4, 8]), _t("b", [8])])
        model = _same(proto, "onnxruntime", {"x": RNG.standard_normal((2, 3, 4)).astype(np.float32)})
        assert [n.op_type for n in model.graph] == ["MatMul", op]
        assert rewrites_applied(model) == {"bias_gelu": 1}


def test_ops_on_constants_broadcast_to_the_batch_run_before_the_broadcast():
    # mask = Expand(causal, [B, 1, 4, 4]); where(mask != 0, 0, -1e9): the compare and the Where run on
    # the constant and one Expand broadcasts the result
    shape_nodes = [N("Shape", ["x"], ["s"], start=0, end=1), N("Concat", ["s", "tail"], ["full"], axis=0)]
    nodes = shape_nodes + [N("Expand", ["causal", "full"], ["m"]), N("Equal", ["m", "zero"], ["e"]),
                           N("Where", ["e", "neg", "zero"], ["bias"]), N("Add", ["x", "bias"], ["y"])]
    causal = helper.make_tensor("causal", F, [1, 1, 4, 4], np.tril(np.ones((4, 4))).ravel())
    inits = [causal, helper.make_tensor("zero", F, [], [0.0]), helper.make_tensor("neg", F, [], [-1e9]),
             helper.make_tensor("tail", onnx.TensorProto.INT64, [3], [1, 4, 4])]
    proto = _model(nodes, [("x", ["B", 1, 4, 4])], [("y", ["B", 1, 4, 4])], inits)
    model = _same(proto, "onnx", {"x": RNG.standard_normal((3, 1, 4, 4)).astype(np.float32)})
    ops = [n.op_type for n in model.graph]
    assert "Equal" not in ops and "Where" not in ops and ops.count("Expand") == 1
    assert rewrites_applied(model)["expand_hoist"] == 2


def test_hand_written_rms_norm_with_reduce_mean_and_reciprocal():
    nodes = [N("Mul", ["x", "x"], ["sq"]), N("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1),
             N("Add", ["ms", "eps"], ["a"]), N("Sqrt", ["a"], ["r"]), N("Reciprocal", ["r"], ["inv"]),
             N("Mul", ["x", "inv"], ["n"]), N("Mul", ["n", "w"], ["y"])]
    inits = [helper.make_tensor("axes", onnx.TensorProto.INT64, [1], [-1]), helper.make_tensor("eps", F, [], [1e-5]),
             _t("w", [8])]
    proto = _model(nodes, [("x", ["B", 3, 8])], [("y", ["B", 3, 8])], inits)
    model = _same(proto, "onnx", {"x": RNG.standard_normal((2, 3, 8)).astype(np.float32)})
    assert [n.op_type for n in model.graph] == ["RMSNormalization"]
    # the mean over another axis is not an RMSNorm over the last one
    inits[0] = helper.make_tensor("axes", onnx.TensorProto.INT64, [1], [1])
    model, _ = _rewritten(_model(nodes, [("x", ["B", 3, 8])], [("y", ["B", 3, 8])], inits), "onnx")
    assert "RMSNormalization" not in [n.op_type for n in model.graph]

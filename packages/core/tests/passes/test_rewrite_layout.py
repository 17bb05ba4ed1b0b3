"""The rewrite stage's layout family: Transposes sunk through elementwise ops meet their inverses and
cancel, as in HF Flax RegNet's squeeze-and-excitation (an activation read by two branches)."""

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from jax2onnx.passes import DeadCodeEliminationPass, RewritePass
from jax2onnx.passes.rewrite import rewrites_applied
from onnx import TensorProto, helper

N = helper.make_node
SHAPE = [2, 4, 3, 3]  # NCHW


def _model(nodes):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, SHAPE) for n in ("a", "b")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None), helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        initializer=[helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def _run(proto, feeds):
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _rewritten(proto):
    model = ir.from_proto(proto)
    RewritePass()(model)
    DeadCodeEliminationPass()(model)
    out = ir.to_proto(model)
    onnx.checker.check_model(out, full_check=True)
    return out, rewrites_applied(model)


def test_squeeze_excitation_transposes_cancel():
    # act = relu(T(a)) is read by the pooled branch (back to NCHW) and by the gate product
    nodes = [N("Transpose", ["a"], ["ta"], perm=[0, 2, 3, 1]), N("Max", ["ta", "zero"], ["act"]),
             N("Transpose", ["act"], ["y"], perm=[0, 3, 1, 2]),
             N("Transpose", ["b"], ["tb"], perm=[0, 2, 3, 1]), N("Sigmoid", ["tb"], ["gate"]),
             N("Mul", ["act", "gate"], ["m"]), N("Transpose", ["m"], ["z"], perm=[0, 3, 1, 2])]
    proto = _model(nodes)
    feeds = {k: np.random.default_rng(0).standard_normal(SHAPE).astype(np.float32) for k in "ab"}
    out, counts = _rewritten(proto)
    assert [n.op_type for n in out.graph.node if n.op_type == "Transpose"] == []
    assert counts["transpose_sink"] >= 2
    for got, want in zip(_run(out, feeds), _run(proto, feeds)):
        np.testing.assert_array_equal(got, want)


def test_a_transpose_read_elsewhere_stays_put():
    # T(a) also feeds the output z: sinking it below Max would add a Transpose, so nothing moves
    nodes = [N("Transpose", ["a"], ["ta"], perm=[0, 2, 3, 1]), N("Max", ["ta", "zero"], ["act"]),
             N("Transpose", ["act"], ["y"], perm=[0, 3, 1, 2]), N("Add", ["ta", "ta"], ["z"]),
             N("Identity", ["b"], ["unused"])]
    proto = _model(nodes)
    out, counts = _rewritten(proto)
    assert "transpose_sink" not in counts
    assert [n.op_type for n in out.graph.node].count("Transpose") == 2

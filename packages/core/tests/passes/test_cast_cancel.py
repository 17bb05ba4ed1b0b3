import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from jax2onnx.passes import CastCancelPass, DeadCodeEliminationPass
from jax2onnx.passes.cast_cancel import exact_cast

T = ir.DataType


def _cast(x, to):
    node = ir.Node("", "Cast", [x], [ir.AttrInt64("to", int(to))])
    node.outputs[0].type = ir.TensorType(to)
    node.outputs[0].shape = x.shape
    return node


def _model(src: T, mid: T, dst: T):
    x = ir.Value(name="x", type=ir.TensorType(src), shape=ir.Shape([4]))
    a = _cast(x, mid)
    b = _cast(a.outputs[0], dst)
    neg = ir.Node("", "Abs", [b.outputs[0]])
    neg.outputs[0].type = ir.TensorType(dst)
    neg.outputs[0].shape = x.shape
    neg.outputs[0].name = "y"
    graph = ir.Graph([x], [neg.outputs[0]], nodes=[a, b, neg], opset_imports={"": 23}, name="g")
    return ir.Model(graph, ir_version=10)


def _run(model, x):
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    return ort.InferenceSession(proto.SerializeToString()).run(None, {"x": x})[0]


@pytest.mark.parametrize(("src", "mid", "dst", "left"), [
    (T.FLOAT16, T.FLOAT, T.FLOAT16, []),  # widen and back: the identity
    (T.FLOAT16, T.FLOAT, T.DOUBLE, ["Cast"]),  # one Cast float16 -> float64
    (T.INT8, T.FLOAT, T.INT32, ["Cast"]),
    (T.BOOL, T.FLOAT, T.INT64, ["Cast"]),
    (T.FLOAT, T.FLOAT16, T.FLOAT, ["Cast", "Cast"]),  # narrowing rounds: a computation, kept
    (T.INT32, T.FLOAT, T.INT32, ["Cast", "Cast"]),  # float32 does not hold every int32
])
def test_exact_pairs_cancel_and_rounding_pairs_stay(src, mid, dst, left):
    model = _model(src, mid, dst)
    x = (np.array([0.1, -2.5, 60000.3, 1 / 3]) if src.numpy().kind == "f" else np.array([0, 1, 1, 0])).astype(src.numpy())
    if src == T.INT32:
        x = np.array([16777217, -3, 5, 0], np.int32)  # 2**24 + 1 rounds in float32
    before = _run(model, x)
    CastCancelPass()(model)
    DeadCodeEliminationPass()(model)
    assert [n.op_type for n in model.graph if n.op_type == "Cast"] == left
    np.testing.assert_array_equal(_run(model, x), before)


def test_graph_output_cast_keeps_its_name():
    x = ir.Value(name="x", type=ir.TensorType(T.FLOAT16), shape=ir.Shape([2]))
    a = _cast(x, T.FLOAT)
    b = _cast(a.outputs[0], T.FLOAT16)
    b.outputs[0].name = "y"
    model = ir.Model(ir.Graph([x], [b.outputs[0]], nodes=[a, b], opset_imports={"": 23}, name="g"), ir_version=10)
    CastCancelPass()(model)
    DeadCodeEliminationPass()(model)
    assert model.graph.outputs[0].name == "y"
    assert [n.op_type for n in model.graph] == ["Cast"] and model.graph.node(0).inputs[0] is x


def test_exact_cast_table():
    assert exact_cast(T.BFLOAT16, T.FLOAT) and exact_cast(T.INT8, T.BFLOAT16)
    assert exact_cast(T.INT32, T.DOUBLE) and exact_cast(T.UINT8, T.FLOAT16) and exact_cast(T.INT16, T.FLOAT)
    assert not exact_cast(T.FLOAT16, T.BFLOAT16) and not exact_cast(T.INT64, T.DOUBLE)
    assert not exact_cast(T.INT16, T.FLOAT16) and not exact_cast(T.FLOAT, T.INT64)

import numpy as np
import onnx_ir as ir
from jax2onnx.passes import DeadCodeEliminationPass


def _model():
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]))
    w = ir.Value(name="w", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]), const_value=ir.Tensor(np.ones(3, np.float32), name="w"))
    unused_w = ir.Value(name="unused", const_value=ir.Tensor(np.zeros(3, np.float32), name="unused"),
                        type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]))
    live = ir.Node("", "Sin", [x])
    dead1 = ir.Node("", "Cos", [x])
    dead2 = ir.Node("", "Mul", [dead1.outputs[0], w])  # dead chain: Cos -> Mul
    out = ir.Node("", "Add", [live.outputs[0], w])
    graph = ir.Graph([x], [out.outputs[0]], nodes=[live, dead1, dead2, out], initializers=[w, unused_w], opset_imports={"": 23})
    return ir.Model(graph, ir_version=10)


def test_removes_dead_chain_and_unused_initializer():
    model = _model()
    result = DeadCodeEliminationPass()(model)
    assert result.modified
    assert [n.op_type for n in model.graph] == ["Sin", "Add"]
    assert list(model.graph.initializers) == ["w"]


def test_reports_no_change_on_clean_graph():
    model = _model()
    DeadCodeEliminationPass()(model)
    assert not DeadCodeEliminationPass()(model).modified

import numpy as np
import onnx
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


def loop_without_state() -> ir.Model:
    """A Loop with a trip count, an omitted cond and no loop-carried values, one scan output."""
    m = ir.Value(name="m", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([]))
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]))
    i = ir.Value(name="i", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([]))
    cond = ir.Value(name="cond", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([]))
    sin = ir.node("Sin", [x], name="sin")
    keep = ir.node("Identity", [cond], name="keep")
    sin.outputs[0].type, sin.outputs[0].shape = ir.TensorType(ir.DataType.FLOAT), ir.Shape([3])
    keep.outputs[0].type, keep.outputs[0].shape = ir.TensorType(ir.DataType.BOOL), ir.Shape([])
    body = ir.Graph([i, cond], [keep.outputs[0], sin.outputs[0]], nodes=[sin, keep], name="body")
    loop = ir.node("Loop", [m, None], attributes={"body": body}, num_outputs=1, name="loop")
    loop.outputs[0].name = "ys"
    loop.outputs[0].type, loop.outputs[0].shape = ir.TensorType(ir.DataType.FLOAT), ir.Shape(["N", 3])
    graph = ir.Graph([m, x], [loop.outputs[0]], nodes=[loop], opset_imports={"": 21}, name="g")
    return ir.Model(graph, ir_version=10)


def test_dead_code_keeps_the_inputs_a_schema_requires():
    """onnx_ir trims trailing omitted inputs; Loop's "" cond must stay (min 2 inputs)."""
    model = loop_without_state()
    DeadCodeEliminationPass()(model)
    loop = next(iter(model.graph))
    assert len(loop.inputs) == 2 and loop.inputs[1] is None
    onnx.checker.check_model(ir.to_proto(model), full_check=True)  # a valid Loop again


def test_an_initializer_read_only_by_a_removed_body_goes():
    """An If with no outputs is dead; its branch nodes keep listing the outer initializer among its
    uses after the If is removed, which must not keep the initializer."""
    w = ir.Value(name="w", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]),
                 const_value=ir.Tensor(np.ones(3, np.float32), name="w"))
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]))
    c = ir.Value(name="c", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([]))
    reads_w = ir.node("Mul", [x, w], name="reads_w")
    branch = ir.Graph([], [], nodes=[reads_w], name="branch")
    dead_if = ir.node("If", [c], attributes={"then_branch": branch, "else_branch": ir.Graph([], [], nodes=[], name="e")},
                      num_outputs=0, name="dead_if")
    live = ir.node("Sin", [x], name="live")
    graph = ir.Graph([x, c], [live.outputs[0]], nodes=[dead_if, live], initializers=[w], opset_imports={"": 21})
    model = ir.Model(graph, ir_version=10)
    DeadCodeEliminationPass()(model)
    assert [n.op_type for n in model.graph] == ["Sin"]
    assert list(model.graph.initializers) == []

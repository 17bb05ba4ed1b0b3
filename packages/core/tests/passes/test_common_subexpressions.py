import onnx_ir as ir
from jax2onnx.passes import CommonSubexpressionEliminationPass


def test_duplicate_nodes_merge_but_different_attributes_do_not():
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(["B", 3]))
    s1 = ir.Node("", "Shape", [x], attributes=[ir.AttrInt64("start", 0), ir.AttrInt64("end", 1)])
    s2 = ir.Node("", "Shape", [x], attributes=[ir.AttrInt64("start", 0), ir.AttrInt64("end", 1)])
    s3 = ir.Node("", "Shape", [x], attributes=[ir.AttrInt64("start", 1), ir.AttrInt64("end", 2)])
    add = ir.Node("", "Add", [s1.outputs[0], s2.outputs[0]])
    mul = ir.Node("", "Mul", [add.outputs[0], s3.outputs[0]])
    graph = ir.Graph([x], [mul.outputs[0]], nodes=[s1, s2, s3, add, mul], opset_imports={"": 23})
    model = ir.Model(graph, ir_version=10)
    assert CommonSubexpressionEliminationPass()(model).modified
    ops = [n.op_type for n in model.graph]
    assert ops == ["Shape", "Shape", "Add", "Mul"]
    add_node = next(n for n in model.graph if n.op_type == "Add")
    assert add_node.inputs[0] is add_node.inputs[1]
    assert not CommonSubexpressionEliminationPass()(model).modified


def test_random_ops_never_merge():
    r1 = ir.Node("", "RandomNormal", [], attributes=[ir.AttrInt64s("shape", [2])])
    r2 = ir.Node("", "RandomNormal", [], attributes=[ir.AttrInt64s("shape", [2])])
    add = ir.Node("", "Add", [r1.outputs[0], r2.outputs[0]])
    graph = ir.Graph([], [add.outputs[0]], nodes=[r1, r2, add], opset_imports={"": 23})
    model = ir.Model(graph, ir_version=10)
    assert not CommonSubexpressionEliminationPass()(model).modified


def test_duplicates_inside_an_if_branch_are_merged():
    # The reason onnx_ir's CommonSubexpressionEliminationPass is not used: it merges in the main
    # graph only, and bodies of Loop/Scan/If and functions kept their duplicates.
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([3]))
    c = ir.Value(name="c", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([]))

    def branch(name):
        s1, s2 = ir.Node("", "Sin", [x]), ir.Node("", "Sin", [x])
        mul = ir.Node("", "Mul", [s1.outputs[0], s2.outputs[0]])
        return ir.Graph([], [mul.outputs[0]], nodes=[s1, s2, mul], name=name)

    then, other = branch("then"), branch("else")
    cond = ir.Node("", "If", [c], attributes=[ir.AttrGraph("then_branch", then), ir.AttrGraph("else_branch", other)])
    graph = ir.Graph([c, x], [cond.outputs[0]], nodes=[cond], opset_imports={"": 23})
    model = ir.Model(graph, ir_version=10)
    assert CommonSubexpressionEliminationPass()(model).modified
    assert [n.op_type for n in then] == ["Sin", "Mul"] and [n.op_type for n in other] == ["Sin", "Mul"]

import numpy as np
import onnx_ir as ir
from jax2onnx.passes import TransposeCancelPass
from pass_checks import pass_keeps_outputs

NHWC_TO_NCHW = [0, 3, 1, 2]
NCHW_TO_NHWC = [0, 2, 3, 1]


def _f(name, shape):
    return ir.Value(name=name, type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(list(shape)))


def _t(v, perm):
    return ir.Node("", "Transpose", [v], attributes=[ir.AttrInt64s("perm", perm)])


def _model(inputs, outputs, nodes):
    for i, v in enumerate(outputs):
        v.name = v.name or f"out{i}"
    graph = ir.Graph(inputs, outputs, nodes=nodes, opset_imports={"": 23})
    return ir.Model(graph, ir_version=10)


def _ops(model):
    return [n.op_type for n in model.graph]


def _check_same_outputs(build, feeds):
    model, result, _ = pass_keeps_outputs(build, feeds, TransposeCancelPass(), check=False)
    return model, result


X = {"x": np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)}


def test_inverse_pair_cancels():
    def build():
        x = _f("x", (2, 3, 4, 5))
        t1 = _t(x, NHWC_TO_NCHW)
        t2 = _t(t1.outputs[0], NCHW_TO_NHWC)
        sin = ir.Node("", "Sin", [t2.outputs[0]])
        return _model([x], [sin.outputs[0]], [t1, t2, sin])

    model, result = _check_same_outputs(build, X)
    assert result.modified
    # The inner Transpose has no reader left; dead-code elimination removes it later.
    assert [n.op_type for n in model.graph if n.outputs[0].uses() or n.op_type == "Sin"] == ["Sin"]
    assert model.graph.node(len(model.graph) - 1).inputs[0] is model.graph.inputs[0]
    assert not TransposeCancelPass()(model).modified


def test_non_inverse_pair_merges_into_one():
    def build():
        x = _f("x", (2, 3, 4, 5))
        t1 = _t(x, [0, 2, 3, 1])
        t2 = _t(t1.outputs[0], [1, 0, 2, 3])
        sin = ir.Node("", "Sin", [t2.outputs[0]])
        return _model([x], [sin.outputs[0]], [t1, t2, sin])

    model, result = _check_same_outputs(build, X)
    assert result.modified
    merged = model.graph.node(1)
    assert merged.inputs[0] is model.graph.inputs[0]
    assert list(merged.attributes["perm"].value) == [2, 0, 3, 1]


def test_pair_around_elementwise_ops_cancels():
    def build():
        x = _f("x", (2, 3, 4, 5))
        t1 = _t(x, NHWC_TO_NCHW)
        relu = ir.Node("", "Relu", [t1.outputs[0]])
        half = ir.Value(name="half", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([]),
                        const_value=ir.tensor(np.array(0.5, np.float32), name="half"))
        mul = ir.Node("", "Mul", [relu.outputs[0], half])
        t2 = _t(mul.outputs[0], NCHW_TO_NHWC)
        sin = ir.Node("", "Sin", [t2.outputs[0]])
        model = _model([x], [sin.outputs[0]], [t1, relu, mul, t2, sin])
        model.graph.register_initializer(half)
        return model

    model, result = _check_same_outputs(build, X)
    assert result.modified
    live = [n.op_type for n in model.graph if any(o.uses() for o in n.outputs) or n.op_type == "Sin"]
    assert live == ["Relu", "Mul", "Sin"]


def test_binary_op_of_two_transposed_values():
    def build():
        x = _f("x", (2, 3, 4, 5))
        y = _f("y", (2, 3, 4, 5))
        tx, ty = _t(x, NHWC_TO_NCHW), _t(y, NHWC_TO_NCHW)
        add = ir.Node("", "Add", [tx.outputs[0], ty.outputs[0]])
        back = _t(add.outputs[0], NCHW_TO_NHWC)
        sin = ir.Node("", "Sin", [back.outputs[0]])
        return _model([x, y], [sin.outputs[0]], [tx, ty, add, back, sin])

    feeds = dict(X, y=np.ones((2, 3, 4, 5), np.float32))
    model, result = _check_same_outputs(build, feeds)
    assert result.modified
    add = next(n for n in model.graph if n.op_type == "Add")
    assert [v.name for v in add.inputs] == ["x", "y"]


def test_kept_when_the_elementwise_result_has_another_reader_or_a_per_channel_operand():
    def build():
        x = _f("x", (2, 3, 4, 5))
        t1 = _t(x, NHWC_TO_NCHW)
        relu = ir.Node("", "Relu", [t1.outputs[0]])
        t2 = _t(relu.outputs[0], NCHW_TO_NHWC)
        chan = ir.Value(name="chan", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([5, 1, 1]),
                        const_value=ir.tensor(np.arange(5, dtype=np.float32).reshape(5, 1, 1), name="chan"))
        add = ir.Node("", "Add", [t1.outputs[0], chan])
        t3 = _t(add.outputs[0], NCHW_TO_NHWC)
        model = _model([x], [t2.outputs[0], relu.outputs[0], t3.outputs[0]], [t1, relu, t2, add, t3])
        model.graph.register_initializer(chan)
        return model

    model, result = _check_same_outputs(build, X)
    assert not result.modified
    assert _ops(model) == ["Transpose", "Relu", "Transpose", "Add", "Transpose"]


def _sin_then_transposes(first, second):
    """x (2, 3, 4, 5) -> Sin -> Transpose(first) -> Transpose(second): the graph-output pair cases."""
    x = _f("x", (2, 3, 4, 5))
    sin = ir.Node("", "Sin", [x])
    t1 = _t(sin.outputs[0], first)
    return x, sin, t1, _t(t1.outputs[0], second)


def test_graph_output_transpose_stays():
    def build():
        x = _f("x", (2, 3, 4, 5))
        t1 = _t(x, NHWC_TO_NCHW)
        t2 = _t(t1.outputs[0], NCHW_TO_NHWC)
        return _model([x], [t2.outputs[0]], [t1, t2])

    model, result = _check_same_outputs(build, X)
    assert not result.modified


def test_graph_output_pair_cancels_onto_the_value_under_it():
    # outputs_as_nchw after a channels-first op: Sin (NCHW) -> to NHWC -> back to NCHW -> output.
    def build():
        x, sin, t1, t2 = _sin_then_transposes(NCHW_TO_NHWC, NHWC_TO_NCHW)
        t2.outputs[0].name = "y"
        t2.outputs[0].shape = ir.Shape([2, 3, 4, 5])
        return _model([x], [t2.outputs[0]], [sin, t1, t2])

    model, result = _check_same_outputs(build, X)
    assert result.modified
    out = model.graph.outputs[0]
    assert out.name == "y" and out.producer().op_type == "Sin" and list(out.shape) == [2, 3, 4, 5]
    assert [n.op_type for n in model.graph if n.outputs[0].uses() or n.outputs[0] is out] == ["Sin"]


def test_graph_output_pair_that_does_not_cancel_merges_and_keeps_the_name():
    def build():
        x, sin, t1, t2 = _sin_then_transposes(NHWC_TO_NCHW, NHWC_TO_NCHW)
        t2.outputs[0].name = "y"
        return _model([x], [t2.outputs[0]], [sin, t1, t2])

    model, result = _check_same_outputs(build, X)
    assert result.modified
    out = model.graph.outputs[0]
    assert out.name == "y" and out.producer().op_type == "Transpose"
    assert out.producer().inputs[0].producer().op_type == "Sin"


def test_graph_output_pair_over_another_output_stays():
    def build():
        x, sin, t1, t2 = _sin_then_transposes(NCHW_TO_NHWC, NHWC_TO_NCHW)
        return _model([x], [sin.outputs[0], t2.outputs[0]], [sin, t1, t2])

    model, result = _check_same_outputs(build, X)
    assert not result.modified

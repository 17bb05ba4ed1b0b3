import numpy as np
import onnx_ir as ir
import pytest
from jax2onnx.passes import DeadCodeEliminationPass, SqueezeCancelPass
from pass_checks import pass_keeps_outputs


def _f(name, shape):
    return ir.Value(name=name, type=ir.TensorType(ir.DataType.FLOAT), shape=None if shape is None else ir.Shape(list(shape)))


def _ints(values):
    return ir.Value(name=None, const_value=ir.tensor(np.asarray(values, np.int64)))


def _node(op, *inputs, shape=None):
    node = ir.Node("", op, list(inputs))
    if shape is not None:
        node.outputs[0].shape = ir.Shape(list(shape))
    return node


def _model(inputs, outputs, nodes, consts):
    for i, v in enumerate(outputs):
        v.name = v.name or f"out{i}"
    for i, c in enumerate(consts):
        c.name = f"c{i}"
    graph = ir.Graph(inputs, outputs, nodes=nodes, initializers=consts, opset_imports={"": 23})
    return ir.Model(graph, ir_version=10)


def _check(build, feeds):
    """The pass's outputs equal the graph's before it; returns the model after the pass + DCE."""
    model, result, _ = pass_keeps_outputs(build, feeds, SqueezeCancelPass(), DeadCodeEliminationPass(), check=False)
    return model, result


def _ops(model):
    return [n.op_type for n in model.graph]


X = {"x": np.random.default_rng(0).standard_normal((1, 3, 4)).astype(np.float32)}


@pytest.mark.parametrize("known", ["both", "squeezed only"])
def test_pair_around_an_elementwise_chain_cancels(known):
    # Unbatched Equinox conv layers meet as Squeeze -> Relu -> Unsqueeze; before shape inference
    # only the jaxpr-side (squeezed) ranks may be known.
    def build():
        x = _f("x", (1, 3, 4))
        axes = _ints([0])
        sq = _node("Squeeze", x, axes, shape=(3, 4))
        relu = _node("Relu", sq.outputs[0], shape=(3, 4))
        neg = _node("Neg", relu.outputs[0], shape=(3, 4))
        un = _node("Unsqueeze", neg.outputs[0], axes, shape=(1, 3, 4) if known == "both" else None)
        tanh = _node("Tanh", un.outputs[0])
        return _model([x], [tanh.outputs[0]], [sq, relu, neg, un, tanh], [axes])

    model, result = _check(build, X)
    assert result.modified
    assert _ops(model) == ["Relu", "Neg", "Tanh"]
    assert list(model.graph.node(1).outputs[0].shape) == [1, 3, 4]


def test_direct_pair_cancels_and_negative_axes_match():
    def build():
        x = _f("x", (1, 3, 4))
        sq = _node("Squeeze", x, _ints([-3]), shape=(3, 4))
        un = _node("Unsqueeze", sq.outputs[0], _ints([0]), shape=(1, 3, 4))
        sin = _node("Sin", un.outputs[0])
        return _model([x], [sin.outputs[0]], [sq, un, sin], [sq.inputs[1], un.inputs[1]])

    model, result = _check(build, X)
    assert result.modified
    assert _ops(model) == ["Sin"]


def test_different_axes_stay():
    x_feed = {"x": np.random.default_rng(1).standard_normal((1, 3, 1)).astype(np.float32)}

    def build():
        x = _f("x", (1, 3, 1))
        sq = _node("Squeeze", x, _ints([0]), shape=(3, 1))
        un = _node("Unsqueeze", sq.outputs[0], _ints([2]), shape=(3, 1, 1))
        sin = _node("Sin", un.outputs[0])
        return _model([x], [sin.outputs[0]], [sq, un, sin], [sq.inputs[1], un.inputs[1]])

    model, result = _check(build, x_feed)
    assert not result.modified
    assert _ops(model) == ["Squeeze", "Unsqueeze", "Sin"]


def test_size_one_constant_of_higher_rank_blocks_the_rewrite():
    # Add((3, 4), ones(1, 1, 1)) is (1, 3, 4): the Unsqueeze reads a different shape than it would.
    def build():
        x = _f("x", (1, 3, 4))
        axes = _ints([0])
        one = ir.Value(name=None, const_value=ir.tensor(np.ones((1, 1, 1), np.float32)))
        sq = _node("Squeeze", x, axes, shape=(3, 4))
        add = _node("Add", sq.outputs[0], one)
        un = _node("Unsqueeze", add.outputs[0], axes)
        return _model([x], [un.outputs[0]], [sq, add, un], [axes, one])

    model, result = _check(build, X)
    assert not result.modified


def test_binary_op_of_two_squeezes_cancels_and_scalar_constant_is_fine():
    feeds = {"x": X["x"], "y": np.random.default_rng(2).standard_normal((1, 1, 4)).astype(np.float32)}

    def build():
        x, y = _f("x", (1, 3, 4)), _f("y", (1, 1, 4))
        axes = _ints([0])
        half = ir.Value(name=None, const_value=ir.tensor(np.float32(0.5)))
        sx = _node("Squeeze", x, axes, shape=(3, 4))
        sy = _node("Squeeze", y, axes, shape=(1, 4))
        add = _node("Add", sx.outputs[0], sy.outputs[0])
        mul = _node("Mul", add.outputs[0], half)
        un = _node("Unsqueeze", mul.outputs[0], axes)
        cos = _node("Cos", un.outputs[0])
        return _model([x, y], [cos.outputs[0]], [sx, sy, add, mul, un, cos], [axes, half])

    model, result = _check(build, feeds)
    assert result.modified
    assert _ops(model) == ["Add", "Mul", "Cos"]


def test_a_second_reader_of_the_chain_keeps_it():
    def build():
        x = _f("x", (1, 3, 4))
        axes = _ints([0])
        sq = _node("Squeeze", x, axes, shape=(3, 4))
        relu = _node("Relu", sq.outputs[0], shape=(3, 4))
        un = _node("Unsqueeze", relu.outputs[0], axes, shape=(1, 3, 4))
        return _model([x], [un.outputs[0], relu.outputs[0]], [sq, relu, un], [axes])

    model, result = _check(build, X)
    assert not result.modified


def test_reshape_reads_past_a_squeeze_unless_its_shape_has_a_zero():
    def build(target):
        def _build():
            x = _f("x", (1, 3, 4))
            sq = _node("Squeeze", x, _ints([0]), shape=(3, 4))
            shape = _ints(target)
            rs = _node("Reshape", sq.outputs[0], shape)
            return _model([x], [rs.outputs[0]], [sq, rs], [sq.inputs[1], shape])
        return _build

    model, result = _check(build([-1]), X)
    assert result.modified and _ops(model) == ["Reshape"]
    model, result = _check(build([0, -1]), X)  # 0 copies dim 0: 3 after the Squeeze, 1 before it
    assert not result.modified

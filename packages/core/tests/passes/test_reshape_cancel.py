import numpy as np
import onnx_ir as ir
import pytest
from jax2onnx.passes import CommonSubexpressionEliminationPass, DeadCodeEliminationPass, ReshapeCancelPass
from pass_checks import pass_keeps_outputs

B, S = ir.SymbolicDim("batch"), ir.SymbolicDim("seq")


def _f(name, shape):
    return ir.Value(name=name, type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(list(shape)))


def _ints(values):
    return ir.Value(name=None, const_value=ir.tensor(np.asarray(values, np.int64)))


def _node(op, *inputs, shape=None, **attrs):
    node = ir.Node("", op, list(inputs), attributes=[ir.AttrInt64(k, v) for k, v in attrs.items()])
    node.outputs[0].shape = None if shape is None else ir.Shape(list(shape))
    return node


def _model(inputs, outputs, nodes, consts):
    for i, v in enumerate(outputs):
        v.name = v.name or f"out{i}"
    for i, c in enumerate(consts):
        c.name = f"c{i}"
    return ir.Model(ir.Graph(inputs, outputs, nodes=nodes, initializers=consts, opset_imports={"": 23}), ir_version=10)


def _run(build, feeds):
    model, result, _ = pass_keeps_outputs(build, feeds, ReshapeCancelPass(), CommonSubexpressionEliminationPass(),
                                          DeadCodeEliminationPass(), check=False)
    return model, result


def _ops(model):
    return [n.op_type for n in model.graph]


RNG = np.random.default_rng(0)
X = {"x": RNG.standard_normal((2, 3, 8)).astype(np.float32)}


def test_split_heads_then_flattened_back_is_nothing():
    # (batch, seq, heads*size) -> (batch, seq, heads, size) -> (batch, seq, -1): what a fused
    # attention op taking 3-D q leaves between the projection and itself
    def build():
        x = _f("x", (B, S, 8))
        split, flat = _ints([0, 0, 2, 4]), _ints([0, 0, -1])
        r1 = _node("Reshape", x, split, shape=(B, S, 2, 4))
        r2 = _node("Reshape", r1.outputs[0], flat, shape=(B, S, 8))
        tanh = _node("Tanh", r2.outputs[0], shape=(B, S, 8))
        return _model([x], [tanh.outputs[0]], [r1, r2, tanh], [split, flat])

    model, result = _run(build, X)
    assert result.modified and _ops(model) == ["Tanh"]


def test_a_computed_inner_target_is_skipped_when_the_outer_copies_only_kept_dims():
    # out4 = Reshape(gqa_out, Concat(Shape(q)[:2], [heads, size])); Reshape(out4, [0, 0, 8])
    def build():
        x = _f("x", (B, S, 8))
        heads = _ints([2, 4])
        lead = _node("Shape", x, shape=(2,), start=0, end=2)
        target = ir.Node("", "Concat", [lead.outputs[0], heads], attributes=[ir.AttrInt64("axis", 0)])
        r1 = _node("Reshape", x, target.outputs[0], shape=(B, S, 2, 4))
        back = _ints([0, 0, 8])
        r2 = _node("Reshape", r1.outputs[0], back, shape=(B, S, 8))
        neg = _node("Neg", r2.outputs[0], shape=(B, S, 8))
        return _model([x], [neg.outputs[0]], [lead, target, r1, r2, neg], [heads, back])

    model, _ = _run(build, X)
    assert _ops(model) == ["Neg"]


def test_a_zero_copying_a_dim_the_inner_reshape_changed_stays():
    # Reshape((2, 3, 8) -> (6, 8)) then (0, -1): the 0 copies 6, not x's 2; the pair must stay
    def build():
        x = _f("x", (2, 3, 8))
        s1, s2 = _ints([6, 8]), _ints([0, -1])
        r1 = _node("Reshape", x, s1, shape=(6, 8))
        r2 = _node("Reshape", r1.outputs[0], s2, shape=(6, 8))
        neg = _node("Neg", r2.outputs[0], shape=(6, 8))
        return _model([x], [neg.outputs[0]], [r1, r2, neg], [s1, s2])

    model, _ = _run(build, X)
    assert _ops(model).count("Reshape") == 1  # the identity one goes, the real one stays
    assert model.graph.outputs[0].shape == ir.Shape([6, 8])


def test_unknown_or_different_symbols_keep_the_reshapes():
    def build():
        x = _f("x", (B, S, 8))
        other = ir.SymbolicDim("other")
        s1, s2 = _ints([0, 0, 2, 4]), _ints([0, 0, -1])
        r1 = _node("Reshape", x, s1, shape=(other, S, 2, 4))  # a middle dim not known to be x's
        r2 = _node("Reshape", r1.outputs[0], s2, shape=(other, S, 8))
        neg = _node("Neg", r2.outputs[0], shape=(other, S, 8))
        return _model([x], [neg.outputs[0]], [r1, r2, neg], [s1, s2])

    model, _ = _run(build, X)
    # the outer Reshape cannot skip the middle one; it is not an identity of its own input either
    assert _ops(model) == ["Reshape", "Reshape", "Neg"]


def test_a_reshape_writing_a_graph_output_keeps_the_name():
    def build():
        x = _f("x", (B, S, 8))
        neg = _node("Neg", x, shape=(B, S, 8))
        same = _ints([0, 0, 8])
        r = _node("Reshape", neg.outputs[0], same, shape=(B, S, 8))
        r.outputs[0].name = "y"
        return _model([x], [r.outputs[0]], [neg, r], [same])

    model, _ = _run(build, X)
    assert [v.name for v in model.graph.outputs] == ["y"] and "Reshape" in _ops(model)


def test_shape_reads_go_to_one_graph_input_and_merge():
    # each layer asked its own value for the batch size: one Shape of the input remains
    def build():
        x = _f("x", (B, S, 8))
        nodes, outs = [], []
        for _ in range(3):
            neg = _node("Neg", x, shape=(B, S, 8))
            split = _ints([0, 0, 2, 4])
            r = _node("Reshape", neg.outputs[0], split, shape=(B, S, 2, 4))
            shape = _node("Shape", r.outputs[0], shape=(1,), start=0, end=1)
            nodes += [neg, r, shape]
            outs.append(shape.outputs[0])
            r.inputs[1].name = None
        consts = [n.inputs[1] for n in nodes if n.op_type == "Reshape"]
        return _model([x], outs, nodes, consts)

    model, result = _run(build, X)
    assert result.modified
    shapes = [n for n in model.graph if n.op_type == "Shape"]
    # outputs keep their own nodes (graph outputs are never merged away), each now reading x
    assert {n.inputs[0].name for n in shapes} == {"x"} and "Reshape" not in _ops(model)


@pytest.mark.parametrize("opset", [13, 23])
def test_below_opset_15_a_shape_read_moves_only_where_it_reads_every_dim(opset):
    # Shape has no start/end before 15: Shape(Reshape(x, [0, 0, 2, 4]))[0:1] stays there, while a
    # Shape of a whole value whose dims an input holds whole moves at any opset
    def build():
        x, m = _f("x", (B, S, 8)), _f("m", (B, S))
        split = _ints([0, 0, 2, 4])
        r = _node("Reshape", x, split, shape=(B, S, 2, 4))
        ranged = _node("Shape", r.outputs[0], shape=(1,), **({"start": 0, "end": 1} if opset >= 15 else {}))
        neg = _node("Neg", m, shape=(B, S))
        whole = _node("Shape", neg.outputs[0], shape=(2,))
        model = _model([x, m], [ranged.outputs[0], whole.outputs[0], r.outputs[0]], [r, ranged, neg, whole], [split])
        model.graph.opset_imports[""] = opset
        return model

    feeds = {**X, "m": RNG.standard_normal((2, 3)).astype(np.float32)}
    model, _ = _run(build, feeds)
    reads = {n.outputs[0].name: (n.inputs[0].name, sorted(n.attributes)) for n in model.graph if n.op_type == "Shape"}
    assert reads["out1"] == ("m", [])  # every dim of m: moved, no start/end needed
    if opset >= 15:
        assert reads["out0"] == ("x", ["end", "start"])
    else:
        assert reads["out0"][0] != "x" and reads["out0"][1] == []

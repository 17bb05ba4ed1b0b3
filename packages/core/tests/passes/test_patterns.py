"""Rule patterns as data (``jax2onnx.rewrite``'s Op/Var/Const/Scalar/OneOf/Opt and ``match``): operands
in either order, dims bound once and compared wherever the name recurs (symbolic or int), variants,
optional inputs, constant predicates, and the Miss a failing sub-pattern carries."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from jax2onnx.rewrite import Const, Miss, OneOf, Op, Opt, Scalar, Var, match, miss, no_match


def _value(graph_nodes: list[ir.Node], name: str) -> ir.Value:
    return next(out for node in graph_nodes for out in node.outputs if out.name == name)


def _input(name: str, shape: list, dtype=ir.DataType.FLOAT) -> ir.Value:
    return ir.Value(name=name, type=ir.TensorType(dtype), shape=ir.Shape(shape))


def _const(name: str, array: np.ndarray) -> ir.Value:
    value = _input(name, list(array.shape))
    value.const_value = ir.tensor(array, name=name)
    return value


def _node(op: str, inputs: list, out: str, shape=None, **attrs) -> ir.Node:
    node = ir.Node("", op, inputs, [ir.convenience.convert_attribute(k, v) for k, v in attrs.items()], name=out)
    node.outputs[0].name = out
    if shape is not None:
        node.outputs[0].shape = ir.Shape(shape)
    return node


def test_commutative_operands_match_in_either_order_and_bind_by_role():
    x, bias = _input("x", ["B", 4]), _const("bias", np.ones(4, np.float32))
    biased = _node("Add", [bias, x], "biased")
    pattern = Op("Add", Var("v"), Const("b", test=lambda t, m: t.ndim == 1), commutative=True)
    found = match(pattern, biased.outputs[0])
    assert found["v"] is x and found["b"].tolist() == [1.0] * 4
    assert not match(Op("Add", Var("v"), Const("b")), biased.outputs[0])  # the fixed order only


def test_a_dim_bound_once_must_be_the_same_dim_where_it_recurs():
    pattern = Op("Add", Var("a", dims="b s h"), Var("c", dims="b s h"), dims="b s h")
    same = _node("Add", [_input("a", ["N", 3, 8]), _input("c", ["N", 3, 8])], "sum", ["N", 3, 8])
    found = match(pattern, same.outputs[0])
    assert found.dims == {"b": ir.SymbolicDim("N"), "s": 3, "h": 8}
    other_batch = _node("Add", [_input("a", ["N", 3, 8]), _input("c", ["M", 3, 8])], "sum", ["N", 3, 8])
    other_width = _node("Add", [_input("a", ["N", 3, 8]), _input("c", ["N", 3, 1])], "sum", ["N", 3, 8])
    wrong_rank = _node("Add", [_input("a", ["N", 3, 8]), _input("c", [3, 8])], "sum", ["N", 3, 8])
    assert not any(match(pattern, n.outputs[0]) for n in (other_batch, other_width, wrong_rank))
    # "_" is any dim, a number that length; dims may be bound before the match
    assert match(Var(dims="_ 3 h"), same.outputs[0], dims={"h": 8})
    assert not match(Var(dims="_ 3 h"), same.outputs[0], dims={"h": 4})


def test_a_name_bound_before_the_match_must_be_that_value():
    x, y = _input("x", [2]), _input("y", [2])
    neg = _node("Neg", [x], "neg")
    assert match(Op("Neg", Var("x")), neg.outputs[0], x=x)
    assert not match(Op("Neg", Var("x")), neg.outputs[0], x=y)


def test_variants_and_optional_inputs():
    x = _input("x", [2, 4])
    starts, ends = _const("starts", np.array([0])), _const("ends", np.array([2]))
    axes = _const("axes", np.array([-1]))
    three, four = _node("Slice", [x, starts, ends], "three"), _node("Slice", [x, starts, ends, axes], "four")
    pattern = Op("Slice", Var("x"), Const(), Const(), Opt(Const("axes")))
    assert "axes" not in match(pattern, three.outputs[0]) and match(pattern, four.outputs[0])["axes"].tolist() == [-1]
    assert not match(Op("Slice", Var("x"), Const(), Const()), four.outputs[0])  # one input too many
    negated = OneOf(Op("Neg", Var("v")), Op("Mul", Var("v"), Scalar(equals=-1.0), commutative=True))
    times = _node("Mul", [_const("minus_one", np.array(-1.0, np.float32)), x], "times")
    twice = _node("Mul", [x, _const("two", np.array(2.0, np.float32))], "twice")
    assert match(negated, times.outputs[0])["v"] is x and not match(negated, twice.outputs[0])
    assert match(Op("Mul", Var(), Scalar("k"), commutative=True), twice.outputs[0])["k"] == 2.0


def test_attributes_and_a_node_anchor():
    x = _input("x", [2, 4])
    concat = _node("Concat", [x, x], "cat", axis=-1)
    last = Op("Concat", Var("x"), Var("x"), attrs={"axis": lambda a: a is not None and a % 2 == 1}, name="cat")
    assert match(last, concat)["cat"] is concat  # a rule's anchor node
    assert not match(Op("Concat", Var(), Var(), attrs={"axis": 0}), concat)


def test_the_failing_sub_pattern_explains_the_miss():
    x = _input("x", [2, 4])
    neg = _node("Neg", [x], "neg")
    why = no_match("not a sum")
    found = match(Op("Add", Var(), Var(), why=why), neg.outputs[0])
    assert isinstance(found, Miss) and found is why and not found.near
    near = miss("the operand is not float32")
    found = match(Op("Neg", Var(dtype=ir.DataType.INT64, why=near)), neg.outputs[0])
    assert found is near and found.near
    assert match(Op("Add", Var(), Var()), neg.outputs[0], why=why) is why  # the caller's reason otherwise

"""The rewrite stage's elementwise family on hand-written graphs: each spelling of a function is
recognised and replaced by its compact form, outputs unchanged in onnxruntime; near misses stay."""

import math

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from jax2onnx.passes import DeadCodeEliminationPass, RewritePass
from jax2onnx.passes.rewrite import rewrites_applied
from onnx import helper

X = np.concatenate([np.linspace(-9, 9, 181), [0.0, 30.0, -30.0]]).astype(np.float32).reshape(1, -1)


def _model(nodes: list, consts: dict, opset: int = 23) -> ir.Model:
    inits = [helper.make_tensor(k, onnx.TensorProto.FLOAT, [], [v]) for k, v in consts.items()]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["B", X.shape[1]])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["B", X.shape[1]])],
                              initializer=inits)
    return ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]))


def _run(model: ir.Model) -> np.ndarray:
    proto = ir.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": X})[0]


def _rewrite(model: ir.Model) -> ir.Model:
    RewritePass()(model)
    DeadCodeEliminationPass()(model)
    return model


N = helper.make_node
GELU_FORMS = {
    # flax/jax: 0.5 * x * (1 + erf(x / sqrt 2)) with a division
    "erf_div": ([N("Div", ["x", "sqrt2"], ["a"]), N("Erf", ["a"], ["b"]), N("Add", ["one", "b"], ["c"]),
                 N("Mul", ["x", "c"], ["d"]), N("Mul", ["d", "half"], ["y"])],
                {"sqrt2": math.sqrt(2), "one": 1.0, "half": 0.5}),
    # torch-exported style: x * 0.5 * (1 + erf(x * 0.70710678))
    "erf_mul": ([N("Mul", ["x", "half"], ["h"]), N("Mul", ["x", "r"], ["a"]), N("Erf", ["a"], ["b"]),
                 N("Add", ["b", "one"], ["c"]), N("Mul", ["h", "c"], ["y"])],
                {"r": math.sqrt(0.5), "one": 1.0, "half": 0.5}),
}
TANH_FORMS = {
    # HF's gelu_new: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3))) with Pow
    "pow": ([N("Pow", ["x", "three"], ["p"]), N("Mul", ["p", "k"], ["q"]), N("Add", ["x", "q"], ["s"]),
             N("Mul", ["s", "c"], ["t"]), N("Tanh", ["t"], ["u"]), N("Add", ["u", "one"], ["v"]),
             N("Mul", ["x", "half"], ["h"]), N("Mul", ["h", "v"], ["y"])],
            {"three": 3.0, "k": 0.044715, "c": math.sqrt(2 / math.pi), "one": 1.0, "half": 0.5}),
    # x*x*x and a division by 2
    "cube": ([N("Mul", ["x", "x"], ["x2"]), N("Mul", ["x2", "x"], ["p"]), N("Mul", ["p", "k"], ["q"]),
              N("Add", ["x", "q"], ["s"]), N("Mul", ["s", "c"], ["t"]), N("Tanh", ["t"], ["u"]),
              N("Add", ["u", "one"], ["v"]), N("Mul", ["x", "v"], ["w"]), N("Div", ["w", "two"], ["y"])],
             {"k": 0.044715, "c": math.sqrt(2 / math.pi), "one": 1.0, "two": 2.0}),
}


@pytest.mark.parametrize("form", sorted(GELU_FORMS))
def test_exact_gelu_spellings_become_gelu(form):
    before = _run(_model(*GELU_FORMS[form]))
    model = _rewrite(_model(*GELU_FORMS[form]))
    assert [n.op_type for n in model.graph] == ["Gelu"]
    assert "approximate" not in model.graph.node(0).attributes or model.graph.node(0).attributes["approximate"].value == "none"
    np.testing.assert_allclose(_run(model), before, rtol=1e-5, atol=1e-6)
    assert rewrites_applied(model) == {"gelu_exact": 1}


@pytest.mark.parametrize("form", sorted(TANH_FORMS))
def test_tanh_gelu_spellings_become_tanh_gelu(form):
    before = _run(_model(*TANH_FORMS[form]))
    model = _rewrite(_model(*TANH_FORMS[form]))
    assert [n.op_type for n in model.graph] == ["Gelu"]
    assert model.graph.node(0).attributes["approximate"].value == "tanh"
    np.testing.assert_allclose(_run(model), before, rtol=1e-5, atol=1e-6)
    assert rewrites_applied(model) == {"gelu_tanh": 1}


def test_gelu_before_opset_20_is_the_erf_formula():
    nodes, consts = GELU_FORMS["erf_div"]
    before = _run(_model(nodes, consts, opset=18))
    model = _rewrite(_model(nodes, consts, opset=18))
    ops = [n.op_type for n in model.graph]
    assert "Gelu" not in ops and ops.count("Erf") == 1 and len(ops) == 5
    np.testing.assert_allclose(_run(model), before, rtol=1e-5, atol=1e-6)


def test_silu_and_sigmoid_written_with_exp():
    # x / (1 + exp(-x)): SiLU
    nodes = [N("Neg", ["x"], ["n"]), N("Exp", ["n"], ["e"]), N("Add", ["e", "one"], ["d"]), N("Div", ["x", "d"], ["y"])]
    before = _run(_model(nodes, {"one": 1.0}))
    model = _rewrite(_model(nodes, {"one": 1.0}))
    assert sorted(n.op_type for n in model.graph) == ["Mul", "Sigmoid"]
    np.testing.assert_allclose(_run(model), before, rtol=1e-5, atol=1e-6)
    # 1 / (1 + exp(-x)): sigmoid
    nodes = [N("Neg", ["x"], ["n"]), N("Exp", ["n"], ["e"]), N("Add", ["e", "one"], ["d"]), N("Reciprocal", ["d"], ["y"])]
    model = _rewrite(_model(nodes, {"one": 1.0}))
    assert [n.op_type for n in model.graph] == ["Sigmoid"]


def test_near_misses_are_left_alone():
    # erf(x / 1.5) is not GELU's constant; a sum of x and another input is not a function of x alone
    nodes, consts = GELU_FORMS["erf_div"]
    model = _rewrite(_model(nodes, {**consts, "sqrt2": 1.5}))
    assert "Gelu" not in [n.op_type for n in model.graph] and rewrites_applied(model) == {}
    nodes = [N("Neg", ["x"], ["n"]), N("Exp", ["n"], ["e"]), N("Add", ["e", "w"], ["d"]), N("Div", ["x", "d"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, [3]) for n in "xw"],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3])])
    model = _rewrite(ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])))
    assert [n.op_type for n in model.graph] == ["Neg", "Exp", "Add", "Div"]


def test_an_intermediate_read_elsewhere_stays_and_the_output_keeps_its_name():
    nodes, consts = GELU_FORMS["erf_div"]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, X.shape[1]])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, X.shape[1]]),
                               helper.make_tensor_value_info("b", onnx.TensorProto.FLOAT, [1, X.shape[1]])],
                              initializer=[helper.make_tensor(k, onnx.TensorProto.FLOAT, [], [v]) for k, v in consts.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    before = sess.run(None, {"x": X})
    model = _rewrite(ir.from_proto(proto))
    assert [v.name for v in model.graph.outputs] == ["y", "b"]
    assert sorted(n.op_type for n in model.graph) == ["Div", "Erf", "Gelu"]  # erf(x/sqrt2) is still returned
    sess = ort.InferenceSession(ir.to_proto(model).SerializeToString(), providers=["CPUExecutionProvider"])
    for got, want in zip(sess.run(None, {"x": X}), before):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

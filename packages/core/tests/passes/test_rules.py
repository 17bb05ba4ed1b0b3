"""Rewrite rules as data: a rule that fires records itself on the nodes it writes, a near miss
explains itself (the failed condition, with its node), the report shows it, and the pass pipeline
gives a pass the shapes and the dead-code-free graph it declares it needs."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx.passes import NO_DEAD_CODE, SHAPES, PassPipeline, RewritePass
from jax2onnx.passes import pipeline as pass_pipeline
from jax2onnx.passes.rewrite import explain_rewrites, rewrites_applied
from jax2onnx.passes.rules import RULE_KEY, Rule, RuleFamily, miss, no_match
from jax2onnx.targets import get_target
from jax2onnx.verification.report import ExportReport, summarize
from onnx import TensorProto, helper, numpy_helper
from pass_checks import run_model

N = helper.make_node
WIDTH = 8
RNG = np.random.default_rng(0)


def _layer_norm_model(eps_constant: bool) -> onnx.ModelProto:
    """``(x - mean(x)) / sqrt(var(x) + eps)`` written out over the last axis; ``eps`` a constant
    or (the near miss) a graph input."""
    inits = [numpy_helper.from_array(np.array([-1], np.int64), "axes")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, WIDTH])]
    if eps_constant:
        inits.append(numpy_helper.from_array(np.array(1e-5, np.float32), "eps"))
    else:
        inputs.append(helper.make_tensor_value_info("eps", TensorProto.FLOAT, []))
    nodes = [
        N("ReduceMean", ["x", "axes"], ["mean"], name="mean"),
        N("Sub", ["x", "mean"], ["centred"], name="centre"),
        N("Mul", ["centred", "centred"], ["sq"], name="square"),
        N("ReduceMean", ["sq", "axes"], ["var"], name="variance"),
        N("Add", ["var", "eps"], ["var_eps"], name="add_eps"),
        N("Sqrt", ["var_eps"], ["std"], name="std"),
        N("Div", ["centred", "std"], ["y"], name="normalise"),
    ]
    graph = helper.make_graph(nodes, "ln", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, WIDTH])],
                              initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def _bias_add_model() -> onnx.ModelProto:
    inits = [numpy_helper.from_array(RNG.standard_normal((WIDTH, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(RNG.standard_normal(3).astype(np.float32), "b")]
    nodes = [N("MatMul", ["x", "w"], ["mm"], name="mm"), N("Add", ["mm", "b"], ["y"], name="bias")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, WIDTH])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def _rules_of(model: ir.Model) -> dict[str, str]:
    return {node.op_type: node.metadata_props[RULE_KEY] for node in model.graph if RULE_KEY in node.metadata_props}


def test_a_rule_that_fires_records_itself_on_the_node_it_writes():
    proto = _bias_add_model()
    x = RNG.standard_normal((4, WIDTH)).astype(np.float32)
    model = ir.from_proto(proto)
    RewritePass()(model)
    assert rewrites_applied(model) == {"matmul_bias_gemm": 1}  # the model-level counts stay
    assert _rules_of(model) == {"Gemm": "bias_add/matmul_bias_gemm"}
    # the record survives the file: the checker takes it and onnxruntime runs the same numbers
    out = ir.to_proto(model)
    (gemm,) = [n for n in out.graph.node if n.op_type == "Gemm"]
    assert {p.key: p.value for p in gemm.metadata_props} == {RULE_KEY: "bias_add/matmul_bias_gemm"}
    (want,) = run_model(ir.from_proto(proto), {"x": x})
    (got,) = run_model(model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_layer_norm_rewrite_records_its_rule_and_keeps_the_numbers():
    proto = _layer_norm_model(eps_constant=True)
    x = RNG.standard_normal((2, WIDTH)).astype(np.float32)
    model = ir.from_proto(proto)
    RewritePass()(model)
    assert rewrites_applied(model) == {"layer_norm": 1}
    assert _rules_of(model) == {"LayerNormalization": "layer_norm/layer_norm"}
    (want,) = run_model(ir.from_proto(proto), {"x": x})
    (got,) = run_model(model, {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    # what fired is gone: nothing left to explain
    assert explain_rewrites(model) == []


def test_a_near_miss_says_which_condition_failed_and_where():
    proto = _layer_norm_model(eps_constant=False)
    model = ir.from_proto(proto)
    RewritePass()(model)
    assert rewrites_applied(model) == {}
    assert "LayerNormalization" not in {n.op_type for n in model.graph}
    (found,) = [m for m in explain_rewrites(model) if m.rule == "layer_norm/layer_norm"]
    assert found.node == "'centre'" and found.op_type == "Sub" and found.misses == 1
    assert found.reason == "the epsilon 'eps' added to the variance is not a constant scalar"
    assert str(found) == ("layer_norm/layer_norm at Sub 'centre': the epsilon 'eps' added to the variance is not a "
                          "constant scalar")


def test_explaining_changes_nothing():
    proto = _layer_norm_model(eps_constant=True)
    model = ir.from_proto(proto)
    explain_rewrites(model)
    assert ir.to_proto(model).SerializeToString() == ir.to_proto(ir.from_proto(proto)).SerializeToString()


def test_a_family_unavailable_at_the_opset_says_so():
    proto = _layer_norm_model(eps_constant=True)
    proto.opset_import[0].version = 16  # LayerNormalization is opset 17
    (found,) = [m for m in explain_rewrites(proto) if m.rule == "layer_norm/layer_norm"]
    assert found.reason == "LayerNormalization is an opset-17 op; the model is opset 16"


def test_the_report_shows_the_explanation():
    model = ir.from_proto(_layer_norm_model(eps_constant=False))
    RewritePass(get_target("onnx"))(model)
    proto = ir.to_proto(model)
    assert summarize(proto).rewrite_misses is None  # only when asked
    summary = summarize(proto, explain=True)
    # a centred LayerNorm's tail is an RMS chain over x - mean(x): that rule names the same epsilon
    assert summary.rewrite_misses == [
        "layer_norm/layer_norm at Sub 'centre': the epsilon 'eps' added to the variance is not a constant scalar",
        "norms/rms_norm at Div 'normalise': neither input of the Add 'add_eps' is a constant scalar epsilon"]
    report = ExportReport(trials=[], summary=summary)
    rows = dict(report._summary_rows())
    assert rows["rewrites missed"] == "; ".join(summary.rewrite_misses)
    assert f"| rewrites missed | {rows['rewrites missed']} |" in report.to_markdown()
    assert json.loads(json.dumps(report.to_dict()))["summary"]["rewrite_misses"] == summary.rewrite_misses


def test_a_target_lists_its_families_after_the_common_ones():
    common = [type(f).__name__ for f in RewritePass().families(23)]
    for target, extra in (("onnx", []), ("onnxruntime", ["OnnxRuntimeContribOps"]), ("tensorrt", ["TensorRtForms"])):
        names = [type(f).__name__ for f in RewritePass(get_target(target)).families(23)]
        assert names == common + extra, target
        assert all(isinstance(f, RuleFamily) for f in RewritePass(get_target(target)).families(23))


# -- the pass pipeline honours declared needs --------------------------------------------------


def _unshaped_chain() -> ir.Model:
    """x → Relu → Neg → Relu → y, intermediates without types or shapes, one dead Abs."""
    nodes = [N("Relu", ["x"], ["a"]), N("Neg", ["a"], ["b"]), N("Abs", ["a"], ["dead"]), N("Relu", ["b"], ["y"])]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 5])])
    return ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]))


class _Reads(ir.passes.InPlacePass):
    """A pass that only looks: the intermediates' shapes and the op types it saw."""

    def __init__(self, needs=frozenset()):
        super().__init__()
        self.needs = frozenset(needs)
        self.shapes: dict[str, object] = {}
        self.ops: list[str] = []

    def call(self, model):
        self.shapes = {n.outputs[0].name: n.outputs[0].shape for n in model.graph}
        self.ops = [n.op_type for n in model.graph]
        return ir.passes.PassResult(model, False)


class _Changes(ir.passes.InPlacePass):
    """A pass that changes the model (renames a node), declaring what it leaves."""

    def __init__(self, keeps_shapes: bool, produces_dead_code: bool = False):
        super().__init__()
        self.keeps_shapes, self.produces_dead_code = keeps_shapes, produces_dead_code

    def call(self, model):
        first = next(iter(model.graph))
        first.name = (first.name or "n") + "_seen"
        return ir.passes.PassResult(model, True)


@pytest.fixture
def inferences(monkeypatch):
    calls = []
    real = pass_pipeline.infer_intermediate_shapes

    def counted(model):
        calls.append(model)
        return real(model)

    monkeypatch.setattr(pass_pipeline, "infer_intermediate_shapes", counted)
    return calls


def test_a_pass_needing_shapes_gets_them(inferences):
    reader = _Reads(needs={SHAPES})
    PassPipeline([reader])(_unshaped_chain())
    assert len(inferences) == 1
    assert {name: list(shape) for name, shape in reader.shapes.items()} == {
        "a": [3, 5], "b": [3, 5], "dead": [3, 5], "y": [3, 5]}


def test_shapes_are_inferred_once_while_the_passes_keep_them(inferences):
    passes = [_Reads(needs={SHAPES}), _Changes(keeps_shapes=True), _Reads(needs={SHAPES})]
    PassPipeline(passes)(_unshaped_chain())
    assert len(inferences) == 1
    passes = [_Reads(needs={SHAPES}), _Changes(keeps_shapes=False), _Reads(needs={SHAPES})]
    PassPipeline(passes)(_unshaped_chain())
    assert len(inferences) == 3  # the change that does not keep shapes made them stale


def test_a_pass_not_needing_shapes_runs_without_inference(inferences):
    reader = _Reads()
    PassPipeline([reader])(_unshaped_chain())
    assert inferences == [] and reader.shapes["a"] is None


def test_dead_code_goes_before_a_pass_that_needs_none():
    kept, cleaned = _Reads(), _Reads(needs={NO_DEAD_CODE})
    PassPipeline([kept, _Changes(keeps_shapes=True, produces_dead_code=True), cleaned])(_unshaped_chain())
    assert "Abs" in kept.ops and "Abs" not in cleaned.ops
    # nothing that produces dead code changed the model: the pass sees it as it came
    untouched = _Reads(needs={NO_DEAD_CODE})
    PassPipeline([_Changes(keeps_shapes=True), untouched])(_unshaped_chain())
    assert "Abs" in untouched.ops


def test_a_rule_family_built_from_data():
    """A family of one rule (a Neg of a Neg is its input), built as data: it fires where the
    pattern and the condition hold, records itself, and explains the near miss."""

    def match(graph, node):
        inner = node.inputs[0].producer()
        if inner is None or inner.op_type != "Neg":
            return no_match("the input is not a Neg")
        if len(inner.outputs[0].uses()) != 1:
            return miss(f"the inner Neg '{inner.name}' has other readers")
        return inner

    def replace(graph, node, inner):
        ident = ir.Node("", "Identity", [inner.inputs[0]], name=f"{node.name}_cancelled")
        graph.insert_before(node, ident)
        ir.convenience.replace_all_uses_with(node.outputs[0], ident.outputs[0])
        graph.outputs[:] = [ident.outputs[0] if v is node.outputs[0] else v for v in graph.outputs]

    class DoubleNeg(RuleFamily):
        name = "demo"
        needs = frozenset()

        def rules(self):
            return [Rule("double_neg", frozenset({"Neg"}), match, replace)]

    nodes = [N("Neg", ["x"], ["a"], name="n1"), N("Neg", ["a"], ["b"], name="n2"), N("Neg", ["x"], ["c"], name="n3"),
             N("Neg", ["c"], ["d"], name="n4"), N("Add", ["c", "d"], ["e"], name="sum"), N("Add", ["b", "e"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)]))
    family = DoubleNeg()
    (near,) = list(family.explain(model))
    assert str(near) == "demo/double_neg at Neg 'n4': the inner Neg 'n3' has other readers"
    assert family(model).modified
    assert json.loads(model.metadata_props["jax2onnx:rewrites"]) == {"double_neg": 1}
    assert {n.name: n.metadata_props.get(RULE_KEY) for n in model.graph if n.op_type == "Identity"} == {
        "n2_cancelled": "demo/double_neg"}


def test_a_node_changed_in_place_records_its_rule_too():
    # TensorRT's flag cast: a bool cast to uint8 for ArgMax becomes a cast to int32, the same node
    nodes = [N("Cast", ["flags"], ["as_int"], name="flag_cast", to=TensorProto.UINT8),
             N("ArgMax", ["as_int"], ["first"], name="first_true", axis=0, keepdims=0)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("flags", TensorProto.BOOL, [5])],
                              [helper.make_tensor_value_info("first", TensorProto.INT64, [])],
                              value_info=[helper.make_tensor_value_info("as_int", TensorProto.UINT8, [5])])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model = ir.from_proto(proto)
    RewritePass(get_target("tensorrt"))(model)
    assert rewrites_applied(model) == {"flag_cast_int32": 1}
    assert _rules_of(model) == {"Cast": "tensorrt/flag_cast_int32"}
    flags = np.array([False, False, True, False, True])
    (got,), (want,) = run_model(model, {"flags": flags}), run_model(ir.from_proto(proto), {"flags": flags})
    assert got == want == 2


def test_a_rule_anchored_in_another_domain_tries_only_that_domains_nodes():
    """``Rule(..., domain=)``: a pack's rule starts from a runtime's own op ("com.example" here),
    and a standard-domain node of the same op type is not its candidate (nor the reverse)."""
    nodes = [N("Relu", ["x"], ["a"], name="standard"), N("Relu", ["a"], ["y"], name="custom", domain="com.example")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    model = ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23),
                                                                  helper.make_opsetid("com.example", 1)]))
    tried: dict[str, list[str]] = {"com.example": [], "": []}

    class Family(RuleFamily):
        name = "domains"

        def rules(self):
            return [Rule(f"seen_{d or 'std'}", frozenset({"Relu"}),
                         lambda g, node, d=d: tried[d].append(node.name) or no_match("only looking"),
                         lambda g, node, found: None, domain=d) for d in tried]

    Family().run(model, {})
    assert tried == {"com.example": ["custom"], "": ["standard"]}

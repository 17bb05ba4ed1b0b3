"""The rewrite stage skips its shape inference and its rules when no family's start op occurs in
the model (main graph, subgraphs, function bodies), and runs them as before when one does."""

import json

import numpy as np
import onnx_ir as ir
import pytest
from jax2onnx.passes import RewritePass
from jax2onnx.passes import pipeline as pass_pipeline
from jax2onnx.passes.rewrite import REWRITES_KEY, TARGET_KEY, could_fire, rewrites_applied
from jax2onnx.targets import get_target
from onnx import TensorProto, helper, numpy_helper

N = helper.make_node
WIDTH = 8


@pytest.fixture
def inferences(monkeypatch):
    """How often the stage's pipeline ran shape inference (the function it calls, counted per call)."""
    calls = []
    real = pass_pipeline.infer_intermediate_shapes

    def counted(model):
        calls.append(model)
        return real(model)

    monkeypatch.setattr(pass_pipeline, "infer_intermediate_shapes", counted)
    return calls


def _weights(name: str, shape, seed: int):
    return numpy_helper.from_array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), name)


def _gemm_relu_mlp(layers: int = 20, extra_nodes=(), extra_inits=(), functions=()):
    """``layers`` Gemm + Relu blocks (what an MLP lowers to: no rule starts from either)."""
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        inits += [_weights(f"w{i}", [WIDTH, WIDTH], i), _weights(f"b{i}", [WIDTH], 100 + i)]
        nodes += [N("Gemm", [x, f"w{i}", f"b{i}"], [f"g{i}"]), N("Relu", [f"g{i}"], [f"h{i}"])]
        x = f"h{i}"
    nodes += list(extra_nodes)
    out = nodes[-1].output[0]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, WIDTH])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                              initializer=inits + list(extra_inits))
    opsets = [helper.make_opsetid("", 23)] + ([helper.make_opsetid("local", 1)] if functions else [])
    return helper.make_model(graph, opset_imports=opsets, functions=list(functions))


@pytest.mark.parametrize("target", ["onnx", "onnxruntime", "tensorrt"])
def test_no_candidate_op_skips_inference_and_rules(inferences, target):
    proto = _gemm_relu_mlp()
    model = ir.from_proto(proto)
    result = RewritePass(get_target(target))(model)
    assert inferences == []
    assert not result.modified
    # the stage still records its (empty) counts and the target, as the report reads them
    assert rewrites_applied(model) == {}
    assert model.metadata_props[TARGET_KEY] == target
    out = ir.to_proto(model)
    assert list(out.graph.node) == list(proto.graph.node)
    # untouched: no shapes inferred onto the intermediates either
    computed = {o for n in out.graph.node for o in n.output}
    assert [vi.name for vi in out.graph.value_info if vi.name in computed and vi.type.tensor_type.HasField("shape")] == []


def test_a_candidate_in_the_main_graph_runs_the_rules(inferences):
    # MatMul + bias on a matrix: the bias-add family's start op, and a match it rewrites into Gemm
    extra = [N("MatMul", ["h19", "wm"], ["mm"]), N("Add", ["mm", "bm"], ["y"])]
    proto = _gemm_relu_mlp(extra_nodes=extra, extra_inits=[_weights("wm", [WIDTH, WIDTH], 7),
                                                           _weights("bm", [WIDTH], 8)])
    model = ir.from_proto(proto)
    RewritePass()(model)
    assert len(inferences) == 1
    assert rewrites_applied(model) == {"matmul_bias_gemm": 1}


def test_a_candidate_in_a_function_body_runs_the_rules(inferences):
    # the only start op (Softmax) sits in a function the graph calls: the check looks there too
    body = helper.make_function("local", "soft", ["a"], ["b"], [N("Softmax", ["a"], ["b"], axis=-1)],
                                [helper.make_opsetid("", 23)])
    proto = _gemm_relu_mlp(extra_nodes=[N("soft", ["h19"], ["y"], domain="local")], functions=[body])
    model = ir.from_proto(proto)
    assert could_fire(model, RewritePass().families(23))
    RewritePass()(model)
    assert len(inferences) == 1
    assert json.loads(model.metadata_props[REWRITES_KEY]) == {}  # a lone Softmax is no attention


def test_every_family_names_its_start_ops():
    # could_fire is only as sound as these sets: each family of each target declares a non-empty one
    for target in ("onnx", "onnxruntime", "tensorrt", "web"):
        families = RewritePass(get_target(target)).families(23)
        assert families, target  # else the loop below checks nothing
        for family in families:
            assert isinstance(family.start_ops, frozenset) and family.start_ops, type(family).__name__

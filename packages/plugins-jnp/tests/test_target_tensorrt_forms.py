"""target="tensorrt": element types within TensorRT's table (exact rewrites, else a refusal naming the
op and the type), static trip counts for the Loops scans become, and the lint's initializer checks."""

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import onnx_ir as ir
import pytest
from jax2onnx import to_onnx, verify
from jax2onnx.errors import TargetUnsupportedError
from jax2onnx.ir.constants import constant_ints
from jax2onnx.passes.rewrite import rewrites_applied
from jax2onnx.targets.tensorrt.lint import check_tensorrt
from onnx import helper


def _export(fn, specs):
    model = to_onnx(fn, specs, target="tensorrt")
    onnx.checker.check_model(model, full_check=True)
    assert check_tensorrt(model) == []
    return model


def _matches(fn, model, inputs):
    report = verify(fn, model, inputs)
    assert report, report.failures()


def test_integer_clip_is_max_and_min():
    fn = lambda x: jnp.clip(x, -3, 5)  # noqa: E731
    model = _export(fn, [jax.ShapeDtypeStruct(("B", 4), jnp.int32)])
    assert [n.op_type for n in model.graph.node] == ["Max", "Min"]
    assert rewrites_applied(model) == {"integer_clip": 1}
    _matches(fn, model, [np.array([[-9, 0, 4, 9], [5, -3, 6, 1]], np.int32)])
    # the generic target keeps Clip (onnxruntime has integer kernels)
    assert [n.op_type for n in to_onnx(fn, [jax.ShapeDtypeStruct(("B", 4), jnp.int32)]).graph.node] == ["Clip"]


def test_argmax_nan_lookup_casts_flags_to_int32_and_reduces_them_as_int32():
    fn = lambda x: jnp.argmax(x, -1)  # noqa: E731
    generic = to_onnx(fn, [("B", 4)], opset=20)
    assert {f.op for f in check_tensorrt(generic)} == {"ArgMax", "ReduceMax"}  # uint8 ArgMax, bool ReduceMax
    model = _export(fn, [("B", 4)])
    assert rewrites_applied(model) == {"bool_reduction": 1, "flag_cast_int32": 1}
    x = np.array([[1, np.nan, 3, 0], [1, 2, 5, 0], [np.nan, np.nan, 0, 7]], np.float32)
    _matches(fn, model, [x])


def test_integer_cumsum_is_refused_naming_the_op_the_type_and_tensorrt():
    with pytest.raises(TargetUnsupportedError) as info:
        to_onnx(lambda x: jnp.cumsum(x, 1), [jax.ShapeDtypeStruct(("B", 4), jnp.int32)], target="tensorrt")
    text = str(info.value)
    assert "\n" not in text and "CumSum" in text and "int32" in text and "TensorRT" in text


def _loops(model):
    """Every Loop node with its graph, the subgraphs of control flow included."""
    out = []

    def walk(graph):
        for node in graph:
            if node.op_type == "Loop":
                out.append(node)
            for attr in node.attributes.values():
                if attr.type == ir.AttributeType.GRAPH:
                    walk(attr.value)

    walk(ir.from_proto(model).graph)
    return out


def test_loops_from_scans_have_constant_trip_counts():
    def fori(x):  # static bounds: a scan without sequences, a Loop
        return jax.lax.fori_loop(0, 5, lambda i, c: c * 0.5 + i, x)

    def stacked(x):  # a scan without xs that stacks its carries (Loop scan outputs)
        return jax.lax.scan(lambda c, _: (c * 0.9 + 1.0, c), x, None, length=6)[1]

    def nested(x):  # the same inside a scan body
        return jax.lax.scan(lambda c, _: (c + stacked(c).sum(0), c), x, None, length=3)[1]

    for fn in (fori, stacked, nested):
        model = _export(fn, [("B", 3)])
        loops = _loops(model)
        assert loops, [n.op_type for n in model.graph.node]
        for loop in loops:
            assert constant_ints(loop.inputs[0]) is not None, f"{fn.__name__}: trip count {loop.inputs[0]} is computed"
        _matches(fn, model, [np.arange(6, dtype=np.float32).reshape(2, 3)])


def test_lint_names_run_time_axes_where_tensorrt_wants_initializers():
    f, i64 = onnx.TensorProto.FLOAT, onnx.TensorProto.INT64
    vi = helper.make_tensor_value_info
    starts = helper.make_tensor("starts", i64, [1], [0])
    ends = helper.make_tensor("ends", i64, [1], [2])
    nodes = [helper.make_node("Slice", ["x", "starts", "ends", "axes"], ["y"], name="slice"),
             helper.make_node("Slice", ["x", "starts", "ends", "const_axes"], ["z"], name="slice_ok")]
    graph = helper.make_graph(nodes, "g", [vi("x", f, [4, 4]), vi("axes", i64, [1])], [vi("y", f, None), vi("z", f, None)],
                              initializer=[starts, ends, helper.make_tensor("const_axes", i64, [1], [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    findings = check_tensorrt(model)
    assert [(x.op, x.node) for x in findings] == [("Slice", "slice")]
    assert "initializer" in findings[0].problem

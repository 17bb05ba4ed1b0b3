"""ir/shapes.py: onnx's inference written back onto the model's own values (main graph and an If's
branches, as onnx_ir's own pass would), and the weightless copy the validation reads."""

import numpy as np
import onnx
import onnx_ir as ir
from jax2onnx.ir.shapes import infer_intermediate_shapes, weightless_proto
from jax2onnx.verification.validate import validate_model
from onnx import TensorProto, helper, numpy_helper
from onnx_ir.passes.common import ShapeInferencePass

N = helper.make_node


def _model_with_a_branch() -> onnx.ModelProto:
    """``y = If(flag, then: relu(x @ w), else: x @ w + b)``, no value_info anywhere."""
    w = numpy_helper.from_array(np.ones((4, 3), np.float32), "w")
    b = numpy_helper.from_array(np.ones(3, np.float32), "b")
    out = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, None)  # noqa: E731
    then = helper.make_graph([N("MatMul", ["x", "w"], ["t_mm"]), N("Relu", ["t_mm"], ["t_out"])], "then", [],
                             [out("t_out")])
    other = helper.make_graph([N("MatMul", ["x", "w"], ["e_mm"]), N("Add", ["e_mm", "b"], ["e_out"])], "else", [],
                              [out("e_out")])
    graph = helper.make_graph(
        [N("Abs", ["x"], ["ax"]), N("If", ["flag"], ["y"], then_branch=then, else_branch=other),
         N("Add", ["y", "y"], ["z"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("flag", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("ax", TensorProto.FLOAT, None)], initializer=[w, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def _typed(model: ir.Model) -> dict[str, tuple]:
    return {v.name: (v.dtype, None if v.shape is None else tuple(v.shape))
            for g in (model.graph, *model.graph.subgraphs()) for n in g for v in n.outputs}


def test_shapes_land_on_the_values_of_every_graph_as_onnx_irs_pass_puts_them():
    ours, theirs = ir.from_proto(_model_with_a_branch()), ir.from_proto(_model_with_a_branch())
    assert infer_intermediate_shapes(ours)
    ShapeInferencePass(check_type=False, strict_mode=False, data_prop=False)(theirs)
    got = _typed(ours)
    assert got == _typed(theirs)
    assert got["t_out"] == (ir.DataType.FLOAT, (2, 3)) and got["e_mm"] == (ir.DataType.FLOAT, (2, 3))
    assert got["z"] == (ir.DataType.FLOAT, (2, 3)) and got["ax"] == (ir.DataType.FLOAT, (2, 4))
    assert not infer_intermediate_shapes(ours)  # nothing new the second time


def test_an_untyped_initializer_a_pass_added_gets_its_type_in_the_checked_copy():
    """A rewrite's new constant (an ir.Value with only a tensor) over 1 KB becomes a typed graph input
    of the weightless copy; without its type the checker refused the model (a Qwen 3.5 export did)."""
    model = ir.from_proto(_model_with_a_branch())
    big = np.arange(600, dtype=np.float32)
    value = ir.Value(name="big", const_value=ir.tensor(big, name="big"))
    model.graph.register_initializer(value)
    model.graph.append(ir.Node("", "ReduceSum", [value], outputs=[ir.Value(name="s")]))
    model.graph.outputs.append(model.graph.node(-1).outputs[0])
    infer_intermediate_shapes(model)
    validate_model(model)  # raised InvalidModelError: "Field 'type' of 'value_info' is required"
    copy = weightless_proto(model)
    assert "big" in {i.name for i in copy.graph.input} and "big" not in {i.name for i in copy.graph.initializer}
    assert [i.name for i in model.graph.initializers.values()][-1] == "big"  # the model keeps it as it was
    np.testing.assert_array_equal(model.graph.initializers["big"].const_value.numpy(), big)

import onnx_ir as ir
from jax2onnx.passes import IdentityEliminationPass


def _f(name, shape=(3,)):
    return ir.Value(name=name, type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(list(shape)))


def test_inner_identity_removed_output_identity_kept():
    x = _f("x")
    ident = ir.Node("", "Identity", [x])
    sin = ir.Node("", "Sin", [ident.outputs[0]])
    out_ident = ir.Node("", "Identity", [sin.outputs[0]])
    graph = ir.Graph([x], [out_ident.outputs[0]], nodes=[ident, sin, out_ident], opset_imports={"": 23})
    model = ir.Model(graph, ir_version=10)
    assert IdentityEliminationPass()(model).modified
    assert [n.op_type for n in model.graph] == ["Sin", "Identity"]
    assert model.graph.node(0).inputs[0] is x
    assert not IdentityEliminationPass()(model).modified


def test_an_array_returned_twice_keeps_both_output_names(mini_registry):
    # The reason onnx_ir's IdentityEliminationPass is not used: it renamed y to output_1 twice.
    import jax.numpy as jnp
    import numpy as np
    from jax2onnx import allclose, to_onnx

    def f(x):
        y = jnp.sin(x)
        return y, y

    model = to_onnx(f, [("B", 3)])
    assert [o.name for o in model.graph.output] == ["output_0", "output_1"]
    assert allclose(f, model, [np.ones((2, 3), np.float32)])

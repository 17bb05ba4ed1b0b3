import numpy as np
import onnx_ir as ir
from jax2onnx.passes import ConstantFoldingPass


def _init(name, arr):
    arr = np.asarray(arr)
    return ir.Value(name=name, type=ir.TensorType(ir.DataType.from_numpy(arr.dtype)), shape=ir.Shape(list(arr.shape)),
                    const_value=ir.Tensor(arr, name=name))


def test_folds_constant_subexpression_and_static_shape():
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2, 3]))
    w = _init("w", np.arange(6, dtype=np.float32).reshape(3, 2))
    t = ir.Node("", "Transpose", [w], attributes=[ir.AttrInt64s("perm", [1, 0])])  # weight layout: folds
    shape = ir.Node("", "Shape", [x])  # static shape: folds
    reshaped = ir.Node("", "Reshape", [t.outputs[0], shape.outputs[0]])
    out = ir.Node("", "Add", [x, reshaped.outputs[0]])
    graph = ir.Graph([x], [out.outputs[0]], nodes=[t, shape, reshaped, out], initializers=[w], opset_imports={"": 23})
    model = ir.Model(graph, ir_version=10)
    result = ConstantFoldingPass()(model)
    assert result.modified
    assert [n.op_type for n in model.graph] == ["Add"]
    folded = model.graph.node(0).inputs[1]
    np.testing.assert_array_equal(folded.const_value.numpy(), np.arange(6, dtype=np.float32).reshape(3, 2).T)


def test_leaves_dynamic_and_random_nodes():
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(["B", 3]))
    shape = ir.Node("", "Shape", [x])
    rnd = ir.Node("", "RandomNormal", [], attributes=[ir.AttrInt64s("shape", [3])])
    out = ir.Node("", "Add", [x, rnd.outputs[0]])
    graph = ir.Graph([x], [out.outputs[0], shape.outputs[0]], nodes=[shape, rnd, out], opset_imports={"": 23})
    model = ir.Model(graph, ir_version=10)
    assert not ConstantFoldingPass()(model).modified
    assert [n.op_type for n in model.graph] == ["Shape", "RandomNormal", "Add"]


def test_large_results_of_compute_ops_are_not_materialised():
    a = _init("a", np.ones((4, 1), np.float32))
    b = _init("b", np.ones((1, 4), np.float32))
    mm = ir.Node("", "MatMul", [a, b])
    graph = ir.Graph([], [mm.outputs[0]], nodes=[mm], initializers=[a, b], opset_imports={"": 23})
    model = ir.Model(graph, ir_version=10)
    assert not ConstantFoldingPass(max_elements=8)(model).modified
    assert ConstantFoldingPass(max_elements=64)(model).modified


def test_shared_weight_is_not_stored_twice():
    """A tied weight (read by Gather and, transposed, by MatMul) keeps its runtime Transpose: folding
    would add a transposed copy beside the original, which Gather still needs."""
    ids = ir.Value(name="ids", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape(["B"]))
    table = _init("table", np.arange(64 * 32, dtype=np.float32).reshape(64, 32))
    gather = ir.Node("", "Gather", [table, ids])
    t = ir.Node("", "Transpose", [table], attributes=[ir.AttrInt64s("perm", [1, 0])])
    mm = ir.Node("", "MatMul", [gather.outputs[0], t.outputs[0]])
    graph = ir.Graph([ids], [mm.outputs[0]], nodes=[gather, t, mm], initializers=[table], opset_imports={"": 23})
    model = ir.Model(graph, ir_version=10)
    assert not ConstantFoldingPass()(model).modified
    assert [n.op_type for n in model.graph] == ["Gather", "Transpose", "MatMul"]
    # a small shared constant still folds (duplicating it costs nothing)
    assert ConstantFoldingPass(shared_max_elements=64 * 32)(model).modified


def test_weights_reshaped_with_one_shared_shape_constant_fold():
    """Reshapes of several weights read one pooled shape constant: that small shared input must not
    keep them as runtime Reshapes (a folded Reshape is a view of the weight, no second copy)."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2, 64]))
    target = _init("target", np.array([64, 64], np.int64))
    nodes, weights, y = [], [], x
    for i in range(2):
        w = _init(f"w{i}", np.arange(64 * 64, dtype=np.float32).reshape(4, 16, 64) + i)
        reshape = ir.Node("", "Reshape", [w, target])
        mm = ir.Node("", "MatMul", [y, reshape.outputs[0]])
        nodes += [reshape, mm]
        weights.append(w)
        y = mm.outputs[0]
    graph = ir.Graph([x], [y], nodes=nodes, initializers=[target, *weights], opset_imports={"": 23})
    model = ir.Model(graph, ir_version=10)
    assert ConstantFoldingPass()(model).modified
    assert [n.op_type for n in model.graph] == ["MatMul", "MatMul"]
    folded = model.graph.node(1).inputs[1].const_value.numpy()
    np.testing.assert_array_equal(folded, np.arange(64 * 64, dtype=np.float32).reshape(64, 64) + 1)


def test_folded_weight_cast_leaves_no_stale_reader_so_the_original_weight_is_dropped():
    from jax2onnx.passes import DeadCodeEliminationPass

    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.DOUBLE), shape=ir.Shape([2, 3]))
    w = _init("w", np.arange(3, dtype=np.float32))
    cast = ir.Node("", "Cast", [w], attributes=[ir.AttrInt64("to", int(ir.DataType.DOUBLE))])
    out = ir.Node("", "Add", [x, cast.outputs[0]])
    graph = ir.Graph([x], [out.outputs[0]], nodes=[cast, out], initializers=[w], opset_imports={"": 23})
    model = ir.Model(graph, ir_version=10)
    assert ConstantFoldingPass()(model).modified
    assert not w.uses()
    DeadCodeEliminationPass()(model)
    assert [v.const_value.dtype for v in model.graph.initializers.values()] == [ir.DataType.DOUBLE]

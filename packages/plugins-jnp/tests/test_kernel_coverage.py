"""Every exported model loads in onnxruntime: (op, dtype) pairs its CPU provider lacks get casts."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx_ir as ir
import pytest
from jax2onnx import allclose, to_onnx
from jax2onnx.ir import runtime
from jax2onnx.passes import KernelCoveragePass
from jax2onnx.targets import default_target

BF16 = jnp.bfloat16


def missing_kernels(opset=None, version="1.32"):
    return runtime.for_version(version).missing(opset)


def test_table_lists_what_the_probe_measured():
    table = missing_kernels()
    assert np.dtype(BF16) in table["MatMul"] and np.dtype(np.int16) in table["Max"]
    assert "Add" in table and np.dtype(np.float32) not in table["Add"]


@pytest.mark.parametrize(
    ("name", "fn", "op"),
    [
        ("bf16_matmul", lambda a, b: (a.astype(BF16) @ b.astype(BF16)).astype(jnp.float32), "MatMul"),
        ("bf16_where", lambda a, b: jnp.where(a > b, a.astype(BF16), b.astype(BF16)).astype(jnp.float32), "Where"),
        ("bf16_exp", lambda a, b: jnp.exp(a.astype(BF16)).astype(jnp.float32) + b, "Exp"),
    ],
)
def test_bfloat16_models_load_and_match(name, fn, op):
    model = to_onnx(fn, [(4, 4), (4, 4)])
    node = next(n for n in model.graph.node if n.op_type == op)
    value_types = {vi.name: vi.type.tensor_type.elem_type for vi in [*model.graph.value_info, *model.graph.input]}
    assert all(value_types.get(i) != 16 for i in node.input[1 if op == "Where" else 0 :] if i in value_types), \
        f"{op} still reads bfloat16"
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((4, 4)).astype(np.float32) for _ in range(2))
    assert allclose(fn, model, [a, b], rtol=2e-2, atol=2e-2)


def test_int16_max_keeps_its_dtype_at_the_boundary():
    fn = lambda a, b: jnp.maximum(a, b)  # noqa: E731
    model = to_onnx(fn, [jax.ShapeDtypeStruct((3,), jnp.int16)] * 2)
    assert model.graph.output[0].type.tensor_type.elem_type == 5  # INT16, as JAX returns it
    a, b = np.array([1, -5, 3], np.int16), np.array([2, 2, -9], np.int16)
    assert allclose(fn, model, [a, b])


def test_graph_output_keeps_its_name():
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.INT16), shape=ir.Shape([2]))
    y = ir.Value(name="y", type=ir.TensorType(ir.DataType.INT16), shape=ir.Shape([2]))
    node = ir.Node("", "Max", [x, x], outputs=[y])
    graph = ir.Graph([x], [y], nodes=[node], opset_imports={"": 23})
    model = ir.Model(graph, ir_version=10)
    assert KernelCoveragePass(default_target().runtime())(model).modified
    assert graph.outputs[0].name == "y" and graph.outputs[0].type.dtype == ir.DataType.INT16
    assert [n.op_type for n in graph] == ["Cast", "Cast", "Max", "Cast"]


@pytest.mark.parametrize(
    ("fn", "dtype", "op"),
    [
        (lambda x: jnp.pad(x, ((1, 0), (0, 2))), jnp.int16, "Pad"),  # no int16/uint16 Pad
        (lambda x: jnp.clip(x, 1, 5), jnp.uint16, "Clip"),  # its function body needs Where(uint16)
        # Einsum: 32/64-bit ints and floats only (two different operands: one array passed twice is no
        # call jnp.einsum's library lowering can recognise, it exports as MatMul)
        (lambda x: jnp.einsum("ij,kj->ik", x, x[::-1]), jnp.int8, "Einsum"),
    ],
    ids=["pad-int16", "clip-uint16", "einsum-int8"],
)
def test_structured_ops_get_carriers(fn, dtype, op):
    """Ops with index/shape inputs besides their T (Pad's pads): only the T inputs travel in the carrier."""
    model = to_onnx(fn, [jax.ShapeDtypeStruct((2, 4), dtype)])
    node = next(n for n in model.graph.node if n.op_type == op)
    assert any(i.endswith(tuple(f"_ortcast{k}" for k in range(1, 9))) for i in node.input), f"{op} got no carrier"
    x = np.asarray([[1, 0, 7, 2], [9, 3, 0, 1]]).astype(dtype)
    assert allclose(fn, model, [x])


def test_a_scatter_reduction_is_part_of_what_is_looked_up():
    """ScatterND refuses bool max only when it runs (the table's ``ScatterND:max``): the pass casts
    its data and updates, not its indices; a plain bool ScatterND keeps its type."""
    def scatter(reduction):
        data = ir.Value(name="data", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([2, 4]))
        upd = ir.Value(name="upd", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([1, 4]))
        idx = ir.Value(name="idx", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([1, 1]))
        y = ir.Value(name="y", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([2, 4]))
        node = ir.Node("", "ScatterND", [data, idx, upd], attributes=[ir.AttrString("reduction", reduction)], outputs=[y])
        graph = ir.Graph([data, idx, upd], [y], nodes=[node], opset_imports={"": 23})
        return ir.Model(graph, ir_version=10), node

    model, node = scatter("max")
    assert KernelCoveragePass(default_target().runtime())(model).modified
    assert [v.type.dtype for v in node.inputs] == [ir.DataType.UINT8, ir.DataType.INT64, ir.DataType.UINT8]
    model, node = scatter("none")
    assert not KernelCoveragePass(default_target().runtime())(model).modified


def test_a_lowering_asks_for_its_reduction_kernels():
    """lax's scatter-max computes bool in the carrier the table gives (``ScatterND:max`` has no bool)."""
    fn = lambda x: x.at[:, np.array([0, 0, 2])].max(x[:, :3])  # noqa: E731
    model = to_onnx(fn, [jax.ShapeDtypeStruct((2, 4), jnp.bool_)])
    node = next(n for n in model.graph.node if n.op_type == "ScatterND")
    value_types = {vi.name: vi.type.tensor_type.elem_type for vi in [*model.graph.value_info, *model.graph.input]}
    assert value_types.get(node.input[0]) not in (None, 9)  # not bool (9), a known carrier
    x = np.asarray([[1, 0, 7, 2], [9, 3, 0, 1]]).astype(jnp.bool_)
    assert allclose(fn, model, [x])


def test_bfloat16_einsum_outside_the_schema_runs_in_float32():
    """ONNX's Einsum has no bfloat16 at all (a graph with one does not load); lax's dot_general
    emits one for contractions MatMul cannot express: the probe lists it, float32 carries it."""
    from jax import lax

    fn = lambda x, y: lax.dot_general(x.astype(BF16), y.astype(BF16), (((0,), (0,)), ((1,), (1,)))).astype(jnp.float32)  # noqa: E731
    model = to_onnx(fn, [(2, 4), (2, 4)])
    assert "Einsum" in {n.op_type for n in model.graph.node}
    x = np.asarray([[0.25, -1.5, 1.5, 0.0], [2.0, -2.25, 3.0, 0.5]], np.float32)
    assert allclose(fn, model, [x, x[::-1]], rtol=2e-2, atol=2e-2)


def test_the_table_follows_the_opset():
    """Pad-13 (opsets 17-20) has no bfloat16 kernel, Pad-21 has from onnxruntime 1.32 (not in 1.31):
    the carrier only where the installed onnxruntime needs it."""
    assert np.dtype(BF16) in missing_kernels(17)["Pad"] and np.dtype(BF16) not in missing_kernels(23).get("Pad", ())
    assert np.dtype(BF16) in missing_kernels(23, "1.31")["Pad"]
    fn = lambda x: jnp.pad(x.astype(BF16), 1).astype(jnp.float32)  # noqa: E731
    x = np.asarray([[1.5, -2.0], [0.25, 3.0]], np.float32)
    pad23 = runtime.installed().supports("Pad", BF16, 23)
    for opset, carried in ((17, True), (23, not pad23)):
        model = to_onnx(fn, [x], opset=opset)
        pad = next(n for n in model.graph.node if n.op_type == "Pad")
        assert any("_ortcast" in i for i in pad.input) == carried, opset
        assert allclose(fn, model, [x])


def test_bool_max_of_the_opset17_scatter_runs_in_uint8():
    """ScatterND's max is opset 18; before it, legalization forms a Max of the data, which ONNX's
    schema does not take for bool: the pass carries it in uint8 (False < True as 0 < 1)."""
    fn = lambda x: x.at[:, np.array([0, 0, 2])].max(x[::-1, :3])  # noqa: E731
    x = np.asarray([[True, False, False, True], [False, False, True, False]])
    model = to_onnx(fn, [x], opset=17)
    assert allclose(fn, model, [x])


def test_every_operand_of_a_variadic_einsum_is_carried():
    fn = lambda x, y: jnp.einsum("ij,kj,k->i", x, y, y[:, 0])  # noqa: E731
    x = np.asarray([[1, -2, 3], [4, 0, -6]], np.int8)
    model = to_onnx(fn, [x, x[::-1]])
    assert allclose(fn, model, [x, x[::-1]])


@pytest.mark.parametrize(("version", "rewritten"), [("1.31", True), ("1.32", False)])
def test_a_matrix_by_a_vector_takes_the_column_form_where_the_runtime_fails_it(version, rewritten):
    """onnxruntime 1.31 fails MatMul((0, 4), (4,)) ("cannot broadcast on dim 0"): for a matrix
    whose rows may be none, the vector becomes a one-column matrix and the result is squeezed."""
    a = ir.Value(name="a", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape(["N", 4]))
    v = ir.Value(name="v", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([4]))
    y = ir.Value(name="y", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape(["N"]))
    graph = ir.Graph([a, v], [y], nodes=[ir.Node("", "MatMul", [a, v], outputs=[y])], opset_imports={"": 23})
    model = ir.Model(graph, ir_version=10)
    assert KernelCoveragePass(runtime.for_version(version))(model).modified == rewritten
    ops = [n.op_type for n in graph]
    assert ops == (["Constant", "Unsqueeze", "MatMul", "Squeeze"] if rewritten else ["MatMul"])
    assert graph.outputs[0].name == "y"
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(ir.serde.serialize_model(model).SerializeToString(), providers=["CPUExecutionProvider"])
    for rows in (3, 0):
        x = np.arange(rows * 4, dtype=np.int64).reshape(rows, 4)
        w = np.array([1, 2, 3, 4], np.int64)
        if rewritten or runtime.installed().supports("MatMul:vector", np.int64):
            np.testing.assert_array_equal(sess.run(None, {"a": x, "v": w})[0], x @ w)

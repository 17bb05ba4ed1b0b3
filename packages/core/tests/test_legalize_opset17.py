"""Ops newer than the export's opset are decomposed exactly (legalize.py): each decomposition at
opset 17 is run in onnxruntime and compared bit for bit with numpy or with the op itself at the
opset that has it."""

from __future__ import annotations

import jax
import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from jax2onnx.ir import opsets
from jax2onnx.ir.builder import ModelBuilder, OpUnavailableError
from jax2onnx.ir.legalize import decomposed_ops


def _run(opset, specs, build, feeds, out_rank=None):
    """Build a graph at ``opset`` from ``build(op, *inputs)``, check it (full check) and run it.
    ``out_rank`` types the outputs where shape inference cannot (to_onnx types them from JAX)."""
    mb = ModelBuilder(opset)
    scope = mb.main
    ins = [scope.add_input(f"in{i}", jax.ShapeDtypeStruct(s, d)) for i, (s, d) in enumerate(specs)]
    outs = build(scope.op, *ins)
    outs = list(outs) if isinstance(outs, tuple) else [outs]
    outs = [scope.op.Identity(o) for o in outs]  # graph outputs get their own names
    for o in outs if out_rank is not None else []:
        o.shape = ir.Shape([None] * out_rank)
    graph = ir.Graph(
        ins,
        outs,
        nodes=scope.nodes,
        initializers=list(mb.initializers.values()),
        opset_imports={"": opset},
        name="legalize_test",
    )
    proto = ir.serde.serialize_model(ir.Model(graph, ir_version=opsets.ir_version(opset)))
    proto = onnx.shape_inference.infer_shapes(proto, strict_mode=True, data_prop=True)  # output shapes, as to_onnx
    onnx.checker.check_model(proto, full_check=True)
    ops = {n.op_type for n in proto.graph.node}
    _run.last_model = proto
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {f"in{i}": f for i, f in enumerate(feeds)}), ops


def _unknown_shape(op, x):
    """``x`` as a value made inside a lowering: typed, without a shape."""
    y = op.Identity(x)
    assert y.shape is None
    return y


INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]


def _ints(rng, dtype, shape):
    info = np.iinfo(dtype)
    edges = np.asarray([info.min, info.max, 0, 1, info.min + 1, info.max - 1, info.max // 2], dtype=dtype)
    vals = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    vals.reshape(-1)[: len(edges)] = edges[: vals.size]
    return vals


@pytest.mark.parametrize("dtype", INT_DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot"])
def test_bitwise_ops_are_exact_below_18(name, dtype):
    rng = np.random.default_rng(0)
    a, b = _ints(rng, dtype, (3, 5)), _ints(rng, dtype, (5,))  # broadcasting operands
    a[0, :] = b  # equal operands somewhere
    unary = name == "BitwiseNot"
    specs = [(a.shape, dtype)] if unary else [(a.shape, dtype), (b.shape, dtype)]
    feeds = [a] if unary else [a, b]
    (got,), ops = _run(17, specs, lambda op, *xs: getattr(op, name)(*xs), feeds)
    expected = {
        "BitwiseAnd": np.bitwise_and,
        "BitwiseOr": np.bitwise_or,
        "BitwiseXor": np.bitwise_xor,
        "BitwiseNot": np.invert,
    }[name](*feeds)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, expected)
    assert not any(o.startswith("Bitwise") for o in ops)
    (native,), ops18 = _run(18, specs, lambda op, *xs: getattr(op, name)(*xs), feeds)
    np.testing.assert_array_equal(native, expected)
    assert ops18 == {name, "Identity"} and not decomposed_ops(_run.last_model)


def test_bitwise_literal_operand_takes_the_other_operands_dtype():
    x = np.asarray([2**32 + 7, 2**64 - 1, 5], dtype=np.uint64)
    (got,), _ = _run(17, [((3,), np.uint64)], lambda op, v: op.BitwiseAnd(v, 2**32 - 1), [x])
    np.testing.assert_array_equal(got, x & np.uint64(2**32 - 1))


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint32, np.uint64], ids=lambda d: np.dtype(d).name)
def test_bitwise_and_with_a_low_bits_mask_is_one_mod(dtype):
    x = _ints(np.random.default_rng(3), dtype, (9,))
    mask = np.asarray([7, 7, 7], dtype=dtype)
    (got,), ops = _run(17, [((9,), dtype)], lambda op, v: op.BitwiseAnd(mask[:1], v), [x])
    np.testing.assert_array_equal(got, x & mask[0])
    assert ops == {"Mod", "Identity"}


def test_bool_bitwise_ops_are_the_logic_ops():
    a = np.asarray([True, False, True, False])
    b = np.asarray([True, True, False, False])
    (got,), ops = _run(17, [((4,), np.bool_)] * 2, lambda op, x, y: op.BitwiseXor(x, y), [a, b])
    np.testing.assert_array_equal(got, a ^ b)
    assert "Xor" in ops


@pytest.mark.parametrize("axes", [[1], [-1, 0], [0, 2]])
def test_pad_axes_of_a_value_without_a_shape_below_18(axes):
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    pads = np.asarray([1] * len(axes) + [2] * len(axes), np.int64)

    def build(op, v):
        return op.Pad(_unknown_shape(op, v), pads, np.float32(-1), np.asarray(axes, np.int64))

    (got,), _ = _run(17, [(x.shape, np.float32)], build, [x])
    (native,), _ = _run(18, [(x.shape, np.float32)], build, [x])
    np.testing.assert_array_equal(got, native)
    full = [(0, 0)] * 3
    for a in axes:
        full[a] = (1, 2)
    np.testing.assert_array_equal(got, np.pad(x, full, constant_values=-1))


@pytest.mark.parametrize(("size", "n", "axis"), [(7, 3, 1), (6, 2, -1), (5, 5, 0)])
def test_split_num_outputs_of_a_dim_unknown_at_build_time_below_18(size, n, axis):
    shape = [size, size]
    x = np.arange(size * size, dtype=np.float32).reshape(shape)

    def build(op, v):
        return op.Split(_unknown_shape(op, v), axis=axis, num_outputs=n, _outputs=n)

    got, ops = _run(17, [(tuple(shape), np.float32)], build, [x], out_rank=2)
    native, _ = _run(18, [(tuple(shape), np.float32)], build, [x], out_rank=2)
    assert [g.shape for g in got] == [g.shape for g in native]
    for g, w in zip(got, native, strict=True):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.uint64])
@pytest.mark.parametrize("reduction", ["min", "max"])
def test_scatternd_min_max_with_repeated_indices_below_18(reduction, dtype):
    rng = np.random.default_rng(1)
    data = (rng.standard_normal((5, 3)) * 10).astype(dtype)
    idx = np.asarray([[1], [3], [1], [1], [0], [3]], np.int64)  # repeats, and rows never written
    upd = (rng.standard_normal((6, 3)) * 10).astype(dtype)
    upd[2] = upd[0]  # ties
    if np.dtype(dtype) == np.uint64:
        data[0, 0], upd[4, 0] = 2**64 - 1, 2**63 + 5  # both halves of uint64's range

    def build(op, d, i, u):
        return op.ScatterND(d, i, u, reduction=reduction)

    specs = [(data.shape, dtype), (idx.shape, np.int64), (upd.shape, dtype)]
    (got,), ops = _run(17, specs, build, [data, idx, upd])
    expected = data.copy()
    combine = np.minimum if reduction == "min" else np.maximum
    for row, u in zip(idx[:, 0], upd, strict=True):
        expected[row] = combine(expected[row], u)
    np.testing.assert_array_equal(got, expected)
    assert "ScatterND" not in ops
    assert decomposed_ops(_run.last_model) == {"ScatterND"}  # what the testcase runner reads


def test_scatternd_element_indices_and_negative_indices_below_18():
    data = np.zeros((2, 3), np.float32)
    idx = np.asarray([[[0, 1], [1, -1]], [[0, 1], [-2, 1]]], np.int64)  # [2, 2, 2]: element updates
    upd = np.asarray([[4.0, 2.0], [-3.0, 7.0]], np.float32)

    def build(op, d, i, u):
        return op.ScatterND(d, i, u, reduction="max")

    specs = [(data.shape, np.float32), (idx.shape, np.int64), (upd.shape, np.float32)]
    (got,), _ = _run(17, specs, build, [data, idx, upd])
    (native,), _ = _run(18, specs, build, [data, idx, upd])
    np.testing.assert_array_equal(got, native)


def test_scatter_elements_min_max_is_declined_by_name_below_18():
    mb = ModelBuilder(17)
    x = mb.main.add_input("x", jax.ShapeDtypeStruct((4,), np.float32))
    i = mb.main.add_input("i", jax.ShapeDtypeStruct((2,), np.int64))
    with pytest.raises(
        OpUnavailableError,
        match=r"ScatterElements\(reduction='max'\) exists from opset 18; this export targets opset 17",
    ):
        mb.main.op.ScatterElements(x, i, x, axis=0, reduction="max")


@pytest.mark.parametrize(("pads", "count_include_pad"), [([0, 0, 0, 0], 1), ([1, 1, 1, 2], 1), ([1, 1, 1, 2], 0)])
def test_average_pool_with_dilations_below_19(pads, count_include_pad):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 7, 8)).astype(np.float32)

    def build(op, v):
        return op.AveragePool(
            v, kernel_shape=[2, 3], dilations=[2, 2], strides=[1, 2], pads=pads, count_include_pad=count_include_pad
        )

    (got,), ops = _run(17, [(x.shape, np.float32)], build, [x])
    (native,), _ = _run(19, [(x.shape, np.float32)], build, [x])
    assert got.shape == native.shape
    np.testing.assert_allclose(got, native, rtol=1e-6, atol=1e-6)
    assert "AveragePool" not in ops


def test_average_pool_unit_dilations_are_dropped_below_19():
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    (got,), ops = _run(
        17,
        [(x.shape, np.float32)],
        lambda op, v: op.AveragePool(v, kernel_shape=[2, 2], strides=[2, 2], dilations=[1, 1]),
        [x],
    )
    assert ops == {"AveragePool", "Identity"}
    np.testing.assert_allclose(got, x.reshape(1, 2, 2, 2, 2, 2).mean(axis=(3, 5)))


def test_average_pool_dilations_with_ceil_mode_are_declined_below_19():
    mb = ModelBuilder(17)
    x = mb.main.add_input("x", jax.ShapeDtypeStruct((1, 1, 5, 5), np.float32))
    with pytest.raises(OpUnavailableError, match=r"AveragePool\(dilations, ceil_mode=1\) exists from opset 19"):
        mb.main.op.AveragePool(x, kernel_shape=[2, 2], dilations=[2, 2], ceil_mode=1)

"""Forms ONNX added at opsets 14 to 17 are rewritten for 13-16 (legalize_opset13.py): each rewrite
is run in onnxruntime and compared with the op itself at the opset that has it (bit for bit where
the rewrite is exact), or with numpy."""

from __future__ import annotations

import jax
import numpy as np
import pytest
from jax2onnx.ir.builder import ModelBuilder, OpUnavailableError
from jax2onnx.ir.legalize import decomposed_ops
from test_legalize_opset17 import _run, _unknown_shape


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.uint16], ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["Add", "Sub", "Mul", "Div"])
def test_narrow_integer_arithmetic_wraps_as_at_14(name, dtype):
    info = np.iinfo(dtype)
    a = np.asarray([info.min, info.max, info.max, 7, -5 if info.min < 0 else 5, 0], dtype=dtype)
    b = np.asarray([info.max, info.max, 2, 3, 2, 1], dtype=dtype)  # overflowing sums and products
    specs = [(a.shape, dtype)] * 2

    def build(op, x, y):
        return getattr(op, name)(x, y)

    (got,), ops = _run(13, specs, build, [a, b])
    (native,), _ = _run(14, specs, build, [a, b])
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, native)
    assert "Cast" in ops


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64])
def test_integer_relu_is_max_below_14(dtype):
    x = np.asarray([-3, 0, 5, np.iinfo(dtype).min, np.iinfo(dtype).max], dtype=dtype)
    (got,), ops = _run(13, [(x.shape, dtype)], lambda op, v: op.Relu(v), [x])
    np.testing.assert_array_equal(got, np.maximum(x, 0))
    assert ops == {"Max", "Identity"}


@pytest.mark.parametrize(("start", "end"), [(1, None), (0, 2), (-2, None), (1, -1)])
def test_shape_start_end_below_15(start, end):
    x = np.zeros((2, 3, 4, 5), np.float32)

    def build(op, v):
        return op.Shape(v, start=start, end=end)

    (got,), ops = _run(13, [(x.shape, np.float32)], build, [x])
    (native,), _ = _run(15, [(x.shape, np.float32)], build, [x])
    np.testing.assert_array_equal(got, native)
    assert "Slice" in ops


@pytest.mark.parametrize("target", [[3, 0, 4], [0, 5, 0], [2, 6], [0]])
def test_reshape_allowzero_with_a_constant_target_below_14(target):
    x = np.zeros((0 if 0 in target else 12,), np.float32)

    def build(op, v):
        return op.Reshape(v, np.asarray(target, np.int64), allowzero=1)

    (got,), _ = _run(13, [(x.shape, np.float32)], build, [x], out_rank=len(target))
    (native,), _ = _run(14, [(x.shape, np.float32)], build, [x], out_rank=len(target))
    assert got.shape == native.shape == tuple(target)


@pytest.mark.parametrize("target", [[3, 0, 4], [2, 6], [1, 12]])
def test_reshape_allowzero_with_a_runtime_target_below_14(target):
    x = np.arange(0 if 0 in target else 12, dtype=np.float32)
    t = np.asarray(target, np.int64)

    def build(op, v, s):
        return op.Reshape(v, s, allowzero=1)

    specs = [(x.shape, np.float32), (t.shape, np.int64)]
    (got,), _ = _run(13, specs, build, [x, t], out_rank=len(target))
    (native,), _ = _run(14, specs, build, [x, t], out_rank=len(target))
    assert got.shape == native.shape == tuple(target)
    np.testing.assert_array_equal(got, native)


def test_hard_swish_below_14():
    x = np.linspace(-5, 5, 41, dtype=np.float32)
    (got,), ops = _run(13, [(x.shape, np.float32)], lambda op, v: op.HardSwish(v), [x])
    assert "HardSwish" not in ops and decomposed_ops(_run.last_model) == {"HardSwish"}
    (native,), _ = _run(14, [(x.shape, np.float32)], lambda op, v: op.HardSwish(v), [x])
    np.testing.assert_allclose(got, native, rtol=1e-6, atol=1e-7)


def test_batch_normalization_inference_below_14():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    scale, bias, mean = (rng.standard_normal(3).astype(np.float32) for _ in range(3))
    var = np.abs(rng.standard_normal(3)).astype(np.float32)

    def build(op, v):
        return op.BatchNormalization(v, scale, bias, mean, var, epsilon=1e-3, training_mode=0)

    (got,), _ = _run(13, [(x.shape, np.float32)], build, [x])
    (native,), _ = _run(15, [(x.shape, np.float32)], build, [x])
    np.testing.assert_array_equal(got, native)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize(("axis", "known_rank"), [(-1, True), (1, True), (-2, False), (1, False)])
def test_layer_normalization_below_17(axis, known_rank, dtype):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((2, 3, 4)) * 3 + 1).astype(dtype)
    tail = x.shape[axis:]
    scale = rng.standard_normal(tail).astype(dtype)
    bias = rng.standard_normal(tail).astype(dtype)

    def build(op, v):
        v = v if known_rank else _unknown_shape(op, v)
        return op.LayerNormalization(v, scale, bias, axis=axis, epsilon=1e-5)

    (got,), ops = _run(16, [(x.shape, dtype)], build, [x], out_rank=3)
    assert "LayerNormalization" not in ops and decomposed_ops(_run.last_model) == {"LayerNormalization"}
    axes = tuple(range(axis % 3, 3))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    want = (x64 - mean) / np.sqrt(((x64 - mean) ** 2).mean(axis=axes, keepdims=True) + np.float32(1e-5))
    want = want * scale + bias
    tol = {np.float16: 2e-3, np.float32: 1e-5, np.float64: 1e-12}[dtype]
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("reduction", ["add", "mul"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_scatternd_add_mul_with_repeated_indices_below_16(reduction, dtype):
    rng = np.random.default_rng(5)
    data = rng.integers(-3, 4, size=(5, 3)).astype(dtype)
    idx = np.asarray([[1], [3], [1], [1], [0], [3]], np.int64)
    upd = rng.integers(-3, 4, size=(6, 3)).astype(dtype)
    if dtype == np.float32:
        data, upd = data + rng.standard_normal(data.shape).astype(dtype), upd * np.float32(0.37)

    def build(op, d, i, u):
        return op.ScatterND(d, i, u, reduction=reduction)

    specs = [(data.shape, dtype), (idx.shape, np.int64), (upd.shape, dtype)]
    (got,), ops = _run(15, specs, build, [data, idx, upd])
    assert "Loop" in ops and "ScatterND" in decomposed_ops(_run.last_model)
    (native,), _ = _run(16, specs, build, [data, idx, upd])
    np.testing.assert_array_equal(got, native)  # the same order of operations: the same bits


def test_scatter_elements_add_along_an_inner_axis_below_16():
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    idx = np.asarray([[0, 0, 3], [1, 2, 1], [3, 3, 3]], np.int64)
    upd = np.asarray([[1.5, 2.0, -1.0], [0.25, 4.0, 8.0], [1.0, 2.0, 3.0]], np.float32)

    def build(op, d, i, u):
        return op.ScatterElements(d, i, u, axis=1, reduction="add")

    specs = [(data.shape, np.float32), (idx.shape, np.int64), (upd.shape, np.float32)]
    (got,), _ = _run(13, specs, build, [data, idx, upd], out_rank=2)
    (native,), _ = _run(16, specs, build, [data, idx, upd])
    np.testing.assert_array_equal(got, native)


def test_dft_with_a_length_is_declined_by_name_below_17():
    mb = ModelBuilder(16)
    x = mb.main.add_input("x", jax.ShapeDtypeStruct((1, 8, 1), np.float32))
    with pytest.raises(OpUnavailableError, match=r"ONNX op DFT with dft_length exists from opset 17; this export targets opset 16"):
        mb.main.op.DFT(x, np.asarray(8, np.int64), np.asarray(1, np.int64))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("pair", "onesided", "inverse", "axis"), [(2, 0, 0, 1), (1, 1, 0, 1), (2, 0, 1, 0), (1, 0, 0, 2)])
def test_dft_below_17_is_the_transform(pair, onesided, inverse, axis, dtype):
    rng = np.random.default_rng(6)
    shape = [3, 7, 5]
    x = rng.standard_normal((*shape, pair)).astype(dtype)

    def build(op, v):
        return op.DFT(_unknown_shape(op, v), None, np.asarray(axis, np.int64), onesided=onesided, inverse=inverse)

    (got,), ops = _run(16, [(x.shape, dtype)], build, [x], out_rank=4)
    assert "DFT" not in ops and "DFT" in decomposed_ops(_run.last_model)
    z = x[..., 0] + 1j * x[..., 1] if pair == 2 else x[..., 0]
    want = (np.fft.ifft if inverse else np.fft.fft)(z.astype(np.complex128), axis=axis)
    if onesided:
        want = np.take(want, range(shape[axis] // 2 + 1), axis=axis)
    assert got.shape == (*want.shape, 2)
    tol = 1e-5 if dtype == np.float32 else 1e-12  # numpy's FFT in double: the reference
    np.testing.assert_allclose(got[..., 0] + 1j * got[..., 1], want, rtol=tol, atol=tol)


def test_bfloat16_selection_and_comparison_below_16():
    # bfloat16 values made in the graph (onnxruntime's Python API takes no bfloat16 arrays)
    a = np.asarray([1.5, -2.0, 3.25, 0.0, -0.0, 7.0], dtype=np.float32)
    b = np.asarray([1.5, 2.0, -3.25, 1.0, 0.0, 6.5], dtype=np.float32)
    c = np.asarray([True, False, True, False, True, False])
    bf16, f32 = 16, 1  # TensorProto.BFLOAT16, FLOAT

    def build(op, x, y, m):
        x, y = op.Cast(x, to=bf16), op.Cast(y, to=bf16)
        return op.Cast(op.Where(m, x, y), to=f32), op.LessOrEqual(x, y), op.GreaterOrEqual(x, y)

    specs = [(a.shape, np.float32), (b.shape, np.float32), (c.shape, np.bool_)]
    (sel, le, ge), ops = _run(15, specs, build, [a, b, c])
    assert {"Where", "LessOrEqual", "GreaterOrEqual"} <= ops
    np.testing.assert_array_equal(sel, np.where(c, a, b))
    np.testing.assert_array_equal(le, a <= b)
    np.testing.assert_array_equal(ge, a >= b)

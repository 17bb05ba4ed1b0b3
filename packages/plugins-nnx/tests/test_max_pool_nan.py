"""Max pooling and NaN (jax2onnx.fusion.max_pool): a window holding NaN pools to NaN as in JAX
through the guard where the input may hold one; the bare MaxPool where no NaN can reach it or the
export turned the guard off (``max_pool_nan_guard=False``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from flax import nnx
from jax2onnx import InputSpecError, allclose, to_onnx
from jax2onnx.fusion import MAX_POOL_OPS
from jax2onnx.testing import channels_last_with_nan

SHAPE = (2, 4, 4, 2)
GUARDED = ["Transpose", "MaxPool", "Transpose", "ReduceSum", "IsNaN", "If"]  # the guard past the Transposes
BARE = ["Transpose", "MaxPool", "Transpose"]


def pool(x):
    return nnx.max_pool(x, (2, 2), (2, 2))


def pool_same(x):
    return nnx.max_pool(x, (3, 3), (2, 2), "SAME")


def _ops(model):
    return [n.op_type for n in model.graph.node]


def _export(fn, specs, **options):
    model = to_onnx(fn, specs, **options)
    onnx.checker.check_model(model, full_check=True)
    return model


@pytest.mark.parametrize("opset", [13, 17, 23])
@pytest.mark.parametrize("fn", [pool, pool_same], ids=["2x2", "3x3-same"])
def test_nan_in_the_input_pools_to_jax_output(fn, opset):
    x = channels_last_with_nan(SHAPE if fn is pool else (2, 5, 5, 2))
    spec = jax.ShapeDtypeStruct(x.shape, jnp.float32)
    guarded = _export(fn, [spec], opset=opset)
    assert _ops(guarded) == GUARDED and set(MAX_POOL_OPS) <= set(_ops(guarded))
    expected = np.asarray(fn(x))
    assert np.isnan(expected).any()
    ok, report = allclose(fn, guarded, [x])
    assert ok, report
    # the guard is what keeps them: onnxruntime's MaxPool alone drops the NaN of the first window
    bare = _export(fn, [spec], opset=opset, max_pool_nan_guard=False)
    assert _ops(bare) == BARE
    assert not allclose(fn, bare, [x])[0]


def test_guard_off_is_the_bare_max_pool():
    spec = jax.ShapeDtypeStruct(("B", 6, 6, 3), jnp.float32)
    model = _export(pool, [spec], max_pool_nan_guard=False)
    assert _ops(model) == BARE
    x = np.random.default_rng(0).standard_normal((2, 6, 6, 3)).astype(np.float32)
    ok, report = allclose(pool, model, [x])
    assert ok, report


def test_guard_option_is_checked():
    with pytest.raises(InputSpecError, match="max_pool_nan_guard must be True"):
        to_onnx(pool, [jax.ShapeDtypeStruct(SHAPE, jnp.float32)], max_pool_nan_guard="off")


def test_integer_input_cast_to_float_cannot_hold_nan():
    def fn(pixels):
        return pool(jnp.abs(pixels.astype(jnp.float32)))

    model = _export(fn, [jax.ShapeDtypeStruct(("B", 4, 4, 3), jnp.int32)])
    assert _ops(model) == ["Cast", "Abs", *BARE]
    x = np.random.default_rng(0).integers(-1000, 1000, (2, 4, 4, 3)).astype(np.int32)
    ok, report = allclose(fn, model, [x])
    assert ok, report


@pytest.mark.parametrize("poisoned", [False, True], ids=["table", "table-with-nan"])
def test_embedding_rows_are_nan_free_when_the_table_is(poisoned):
    table = np.random.default_rng(0).standard_normal((10, 8)).astype(np.float32)
    if poisoned:
        table[3, 5] = np.nan

    def fn(ids):
        return nnx.max_pool(jnp.asarray(table)[ids], (3,), (1,))

    model = _export(fn, [jax.ShapeDtypeStruct((2, 5), jnp.int32)])
    assert ("If" in _ops(model)) is poisoned
    ids = np.array([[1, 2, 3, 4, 5], [0, 9, 8, 7, 6]], np.int32)
    assert bool(np.isnan(np.asarray(fn(ids))).any()) == poisoned  # row 3 is picked
    ok, report = allclose(fn, model, [ids])
    assert ok, report


def test_arithmetic_on_nan_free_values_keeps_the_guard():
    # 0 * inf is NaN: a product of NaN-free values may hold one, so the guard stays
    def fn(pixels):
        return pool(pixels.astype(jnp.float32) * jnp.inf)

    model = _export(fn, [jax.ShapeDtypeStruct(SHAPE, jnp.int32)])
    assert "If" in _ops(model)
    pixels = np.arange(np.prod(SHAPE), dtype=np.int32).reshape(SHAPE) % 5  # zeros among them
    assert np.isnan(np.asarray(fn(pixels))).any()
    ok, report = allclose(fn, model, [pixels])
    assert ok, report


def test_the_guard_of_a_lone_pool_reads_the_channels_last_input():
    """Before a flatten the pool's Transposes stay: the guard moves past them (passes/max_pool_guard.py),
    so Transpose → MaxPool → Transpose is one unbroken chain (onnxruntime's channels-last kernel)
    and the check sums the graph input itself."""
    w = np.random.default_rng(1).standard_normal((2 * 2 * 2, 3)).astype(np.float32)

    def fn(x):
        return pool(x).reshape(x.shape[0], -1) @ w

    model = _export(fn, [jax.ShapeDtypeStruct(("B", 4, 4, 2), jnp.float32)])
    by_output = {o: n for n in model.graph.node for o in n.output}
    (max_pool,) = [n for n in model.graph.node if n.op_type == "MaxPool"]
    assert by_output[max_pool.input[0]].op_type == "Transpose"
    assert [n.op_type for n in model.graph.node if max_pool.output[0] in n.input] == ["Transpose"]
    (total,) = [n for n in model.graph.node if n.op_type == "ReduceSum"]
    assert total.input[0] == model.graph.input[0].name
    for x in (channels_last_with_nan((3, 4, 4, 2)), np.random.default_rng(2).standard_normal((1, 4, 4, 2)).astype(np.float32)):
        ok, report = allclose(fn, model, [x])
        assert ok, report


class _PixelNet(nnx.Module):
    """Integer pixels scaled, then Conv, BatchNorm, relu and a max pool: every value bounded."""

    def __init__(self, scale: float):
        self.scale = scale
        self.conv = nnx.Conv(2, 4, (3, 3), rngs=nnx.Rngs(0))
        self.norm = nnx.BatchNorm(4, use_running_average=True, rngs=nnx.Rngs(1))

    def __call__(self, pixels):
        x = pixels.astype(jnp.float32) * self.scale
        return pool(jax.nn.relu(self.norm(self.conv(x)) - self.norm(self.conv(x)) * 0.5))


def test_bounded_arithmetic_on_integer_pixels_needs_no_guard():
    net = _PixelNet(1 / 255)
    model = _export(net, [jax.ShapeDtypeStruct(("B", 6, 6, 2), jnp.uint8)])
    assert "If" not in _ops(model) and "MaxPool" in _ops(model)
    pixels = np.random.default_rng(0).integers(0, 256, (2, 6, 6, 2)).astype(np.uint8)
    ok, report = allclose(net, model, [pixels])
    assert ok, report


def test_arithmetic_that_may_overflow_keeps_the_guard():
    net = _PixelNet(1e37)  # 255 * 1e37 is inf in float32, and inf - inf is NaN
    model = _export(net, [jax.ShapeDtypeStruct(("B", 6, 6, 2), jnp.uint8)])
    assert "If" in _ops(model)
    pixels = np.full((1, 6, 6, 2), 255, np.uint8)
    pixels[0, :3] = 0
    expected = np.asarray(net(pixels))
    assert np.isnan(expected).any() and not np.isnan(expected).all()
    ok, report = allclose(net, model, [pixels])
    assert ok, report

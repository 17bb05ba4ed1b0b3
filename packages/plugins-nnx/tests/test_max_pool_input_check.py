"""A net fed floats checks its input once instead of each max pool's input (passes/nan_guard_hoist.py):
the main graph runs the bare pools, one ``ReduceL1`` of the input decides, in an ``If`` at the
outputs, whether the copy of the guarded graph answers instead. Every input (NaN, infinities,
values whose sum overflows, ordinary ones) gives JAX's output."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from flax import nnx
from jax2onnx import allclose, to_onnx

IMAGES = jax.ShapeDtypeStruct(("B", 8, 8, 2), jnp.float32)


class _ConvPoolNet(nnx.Module):
    """conv (2 → 8 channels) → relu → max pool [→ conv → relu → max pool] → conv; ``log`` puts a
    Log (no bound) before the first pool."""

    def __init__(self, *, pools: int = 1, log: bool = False, stride: int = 1):
        rngs = nnx.Rngs(0)
        self.pools, self.log = pools, log
        self.conv1 = nnx.Conv(2, 8, (3, 3), strides=(stride, stride), rngs=rngs)
        self.conv2 = nnx.Conv(8, 8, (3, 3), rngs=rngs)
        self.head = nnx.Conv(8, 3, (1, 1), rngs=rngs)

    def __call__(self, x):
        h = jax.nn.relu(self.conv1(x))
        if self.log:
            h = jnp.log(h + 1.0)
        h = nnx.max_pool(h, (2, 2), (2, 2))
        if self.pools == 2:
            h = nnx.max_pool(jax.nn.relu(self.conv2(h)), (2, 2), (2, 2))
        return self.head(h)


def _export(net, spec=IMAGES, **options):
    model = to_onnx(net, [spec], **options)
    onnx.checker.check_model(model, full_check=True)
    return model


def _top(model):
    return [n.op_type for n in model.graph.node]


def _inputs(batch: int = 2) -> dict[str, np.ndarray]:
    x = np.random.default_rng(0).standard_normal((batch, 8, 8, 2)).astype(np.float32)
    nan, inf, huge = x.copy(), x.copy(), x * np.float32(3e37)  # huge: finite, but its L1 sum overflows
    nan[0, 3, 4, 1] = np.nan
    inf[1, 0, 0, 0] = np.inf
    return {"ordinary": x, "nan": nan, "inf": inf, "huge": huge}


@pytest.mark.parametrize("pools", [1, 2])
def test_the_input_is_checked_once_and_the_pools_run_bare(pools):
    net = _ConvPoolNet(pools=pools)
    model = _export(net)
    top = _top(model)
    assert top.count("MaxPool") == pools and top.count("ReduceL1") == 1 and top.count("If") == 1
    assert not {"ReduceSum", "IsNaN"} & set(top)
    (check,) = [n for n in model.graph.node if n.op_type == "ReduceL1"]
    assert check.input[0] == model.graph.input[0].name
    hoisted = model.graph.node[-1]
    assert hoisted.op_type == "If" and [o for o in hoisted.output] == [o.name for o in model.graph.output]
    exact = next(a.g for a in hoisted.attribute if a.name == "then_branch")
    assert [n.op_type for n in exact.node].count("If") == pools  # each pool's own guard, in the copy
    for name, x in _inputs().items():
        expected = np.asarray(net(x))
        if name == "nan":
            assert np.isnan(expected).any() and not np.isnan(expected).all()
        ok, report = allclose(net, model, [x])
        assert ok, f"{name}: {report}"


def test_a_pool_the_bound_does_not_reach_keeps_its_guard():
    net = _ConvPoolNet(log=True)  # log(h + 1): no bound follows a Log
    model = _export(net)
    top = _top(model)
    assert "ReduceL1" not in top and {"MaxPool", "ReduceSum", "IsNaN", "If"} <= set(top)
    for name, x in _inputs().items():
        ok, report = allclose(net, model, [x])
        assert ok, f"{name}: {report}"


def test_an_input_larger_than_the_pools_input_keeps_their_guards():
    net = _ConvPoolNet(stride=4)  # (B, 16, 16, 2) in, (B, 4, 4, 8) pooled: the input is the larger read
    spec = jax.ShapeDtypeStruct(("B", 16, 16, 2), jnp.float32)
    model = _export(net, spec)
    assert "ReduceL1" not in _top(model) and "IsNaN" in _top(model)
    x = np.random.default_rng(1).standard_normal((2, 16, 16, 2)).astype(np.float32)
    x[0, 5, 5, 0] = np.nan
    ok, report = allclose(net, model, [x])
    assert ok, report


def test_the_guard_off_or_no_optimization_leaves_no_input_check():
    net = _ConvPoolNet()
    assert _top(_export(net, max_pool_nan_guard=False)).count("If") == 0
    unoptimized = _top(_export(net, optimize=False))
    assert "ReduceL1" not in unoptimized and "IsNaN" in unoptimized


def test_outputs_that_do_not_read_the_pool_pass_through_the_check():
    net = _ConvPoolNet()

    def two(x):
        return net(x), jnp.tanh(x).sum(axis=(1, 2))

    model = _export(two)
    assert _top(model)[-1] == "If" and len(model.graph.node[-1].output) == 2
    for name, x in _inputs().items():
        ok, report = allclose(two, model, [x])
        assert ok, f"{name}: {report}"


def test_a_guarded_pool_that_is_the_models_output():
    """Channels-first: the guard's If was the graph output itself; the hoist gives the name to the
    If at the outputs and the bare pool runs in the main graph."""
    w = np.random.default_rng(3).standard_normal((8, 2, 3, 3)).astype(np.float32)

    def conv_pool(x):
        h = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME")
        return jax.lax.reduce_window(h, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

    model = _export(conv_pool, jax.ShapeDtypeStruct(("B", 2, 8, 8), jnp.float32))
    assert _top(model)[-1] == "If" and model.graph.node[-1].output[0] == model.graph.output[0].name
    assert "MaxPool" in _top(model) and "IsNaN" not in _top(model)
    for name, x in _inputs().items():
        if name == "huge":
            continue  # the conv's own sums overflow there, to inf or NaN by the order each runtime adds in
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
        ok, report = allclose(conv_pool, model, [x])
        assert ok, f"{name}: {report}"

"""@onnx_function: named FunctionProtos, sharing identical bodies, nesting, transparency outside export."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
from jax2onnx import allclose, onnx_function, to_onnx


class Block:
    def __init__(self, seed: int):
        self.w = np.random.default_rng(seed).standard_normal((4, 4)).astype(np.float32)

    def __call__(self, x):
        return jnp.sin(x @ self.w)


FnBlock = onnx_function(type("FnBlock", (Block,), {}))


def test_decorated_class_becomes_named_function(mini_registry):
    block = FnBlock(0)
    model = to_onnx(lambda x: block(x), [("B", 4)])
    assert [f.name for f in model.functions] == ["FnBlock"]
    assert [n.op_type for n in model.graph.node] == ["FnBlock"]
    assert {n.op_type for n in model.functions[0].node} >= {"Einsum", "Sin"}
    onnx.checker.check_model(model, full_check=True)
    for b in (2, 3):
        assert allclose(lambda x: block(x), model, [np.random.rand(b, 4).astype(np.float32)])


def test_same_weights_share_one_function_different_weights_do_not(mini_registry):
    a, a2, b = FnBlock(0), FnBlock(0), FnBlock(1)

    def f(x):
        return b(a2(a(x)))

    model = to_onnx(f, [("B", 4)])
    assert len(model.functions) == 2
    assert [n.op_type for n in model.graph.node].count(model.functions[0].name) == 2
    assert allclose(f, model, [np.random.rand(3, 4).astype(np.float32)])


def test_nested_functions(mini_registry):
    inner = FnBlock(0)

    @onnx_function
    def outer(x):
        return inner(x) * 2.0

    model = to_onnx(lambda x: outer(x) + 1.0, [(2, 4)])
    names = {f.name for f in model.functions}
    assert names == {"outer", "FnBlock"}
    outer_fn = next(f for f in model.functions if f.name == "outer")
    assert "FnBlock" in {n.op_type for n in outer_fn.node}
    assert allclose(lambda x: outer(x) + 1.0, model, [np.random.rand(2, 4).astype(np.float32)])


def test_call_params_static_and_runtime(mini_registry):
    @onnx_function
    def scaled(x, scale=2.0):
        return x * scale

    def f(x, scale=3.0):
        return scaled(x) + scaled(x, scale=scale)

    model = to_onnx(f, [(3,)], input_params={"scale": 3.0})
    fn_inputs = sorted(len(fn.input) for fn in model.functions)
    assert fn_inputs == [1, 2]  # default baked in; runtime param is a function input
    assert allclose(f, model, [np.random.rand(3).astype(np.float32)], {"scale": np.float32(5.0)})


def test_transparent_outside_export_and_under_transformations():
    block = FnBlock(0)
    x = np.random.rand(3, 4).astype(np.float32)
    np.testing.assert_allclose(block(x), jnp.sin(x @ block.w), rtol=1e-6)
    g = jax.grad(lambda v: jnp.sum(block(v)))(x)
    assert g.shape == x.shape


def test_function_under_vmap_and_grad_exports(mini_registry):
    block = FnBlock(0)

    def f(x):
        return jax.vmap(block)(x) + jax.grad(lambda v: jnp.sum(block(v)))(x)

    model = to_onnx(f, [(2, 3, 4)])
    assert allclose(f, model, [np.random.rand(2, 3, 4).astype(np.float32)])


def test_decorated_subclass_of_decorated_class_is_one_function(mini_registry):
    Sub = onnx_function(type("SubBlock", (FnBlock,), {}))
    block = Sub(0)
    model = to_onnx(lambda x: block(x), [(2, 4)])
    assert [f.name for f in model.functions] == ["SubBlock"]
    assert "FnBlock" not in {n.op_type for n in model.functions[0].node}

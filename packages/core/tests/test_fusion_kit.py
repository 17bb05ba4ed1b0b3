"""The fusion kit (``jax2onnx.fusion``) on a hand-made "layer": weights as named operands, the
lowering reading them back, declining to the body, and the kit's static helpers. The packs'
testcases exercise the emission helpers on real libraries; this file needs no library."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import allclose, fusion, to_onnx
from jax2onnx.plugin import Lowerings
from mini_pack import lowerings as mini_lowerings
from mini_pack import pack_of, registry_in_use

MARK = "test.scale_shift"


class ScaleShift:
    """A library-agnostic layer: ``x * weights["scale"] + weights["shift"]``."""

    def __init__(self, scale, shift):
        self.weights = {"scale": scale, "shift": shift}

    def math(self, weights, x):
        return x * weights["scale"] + weights["shift"]

    def __call__(self, x):
        flat, treedef = jax.tree_util.tree_flatten_with_path(self.weights)
        named = [(fusion.path_name(p), v) for p, v in flat]

        def run(leaves, x):
            return self.math(jax.tree_util.tree_unflatten(treedef, leaves), x)

        return fusion.call_region(MARK, run, {"x": x}, named, note="static")


def _lowering(seen: list) -> Lowerings:
    lowerings = Lowerings()

    @lowerings.register_call(MARK)
    def lower(ctx, *ins):
        ops = fusion.Operands(ctx, ins)
        seen.append((ctx.marked.params["operands"], ctx.marked.params["note"], ops.shape("scale"), "x" in ops))
        if not fusion.one_output_like(ctx, ops.shape("x")):
            return None
        # Mul then Add, as one would emit a fused op; the weights are initializers.
        assert fusion.const_array(ops["scale"]) is not None
        return ctx.op.Add(ctx.op.Mul(ops["x"], ops["scale"]), ops["shift"])

    return lowerings


def _export(extra: Lowerings, fn, specs):
    with registry_in_use(("jax2onnx-fusionkit", pack_of(mini_lowerings, extra))):
        return to_onnx(fn, specs)


def _layer():
    rng = np.random.default_rng(0)
    return ScaleShift(jnp.asarray(rng.uniform(-1, 1, 4), jnp.float32), jnp.asarray(rng.uniform(-1, 1, 4), jnp.float32))


def test_operands_arrive_by_name_and_the_lowering_fuses():
    layer, seen = _layer(), []
    model = _export(_lowering(seen), layer, [(3, 4)])
    onnx.checker.check_model(model, full_check=True)
    assert [n.op_type for n in model.graph.node] == ["Mul", "Add"]
    assert seen == [(("x", "scale", "shift"), "static", (4,), True)]
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    assert allclose(layer, model, [x])


def test_under_grad_the_forward_part_declines_to_the_body():
    """``grad`` gives the region residual outputs: ``one_output_like`` is False, the body is lowered."""
    layer, seen = _layer(), []
    fn = jax.grad(lambda x: jnp.sum(layer(x) ** 2))
    model = _export(_lowering(seen), fn, [(3, 4)])
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    assert allclose(fn, model, [x])


def test_outside_an_export_the_region_is_the_plain_call():
    layer = _layer()
    x = jnp.ones((2, 4), jnp.float32)
    np.testing.assert_array_equal(np.asarray(layer(x)), np.asarray(x * layer.weights["scale"] + layer.weights["shift"]))


def test_path_names():
    tree = {"query": {"kernel": 1, "bias": 2}, "layers": [3]}
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    assert sorted(fusion.path_name(p) for p, _ in flat) == ["layers/0", "query/bias", "query/kernel"]
    assert sorted(fusion.path_name(p, skip=1) for p, _ in flat) == ["0", "bias", "kernel"]
    nested, _ = jax.tree_util.tree_flatten_with_path({"w": {"value": 1}})
    assert fusion.path_name(nested[0][0], drop_trailing=("value",)) == "w"


@pytest.mark.parametrize("size,window,stride", [(5, 2, 2), (7, 3, 2), (6, 3, 1), (4, 4, 3)])
def test_same_pads_are_jax_same_padding(size, window, stride):
    lo, hi = fusion.same_pads([size], [window], [stride])
    x = jnp.arange(size, dtype=jnp.float32).reshape(1, size, 1)
    same = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, window, 1), (1, stride, 1), "SAME")
    explicit = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, window, 1), (1, stride, 1), [(0, 0), (lo, hi), (0, 0)])
    np.testing.assert_array_equal(np.asarray(same), np.asarray(explicit))


def test_attention_inputs_keep_self_attention_one_operand():
    q, kv, mask = jnp.ones((2, 3)), jnp.zeros((2, 3)), jnp.ones((2, 2), bool)
    inputs, unpack = fusion.attention_inputs(q, q, q)
    assert list(inputs) == ["q"] and all(a is q for a in unpack(q)[:3]) and unpack(q)[3] is None
    inputs, unpack = fusion.attention_inputs(q, kv, kv, mask)
    assert list(inputs) == ["q", "k", "mask"]
    got = unpack(*inputs.values())
    assert got[0] is q and got[1] is kv and got[2] is kv and got[3] is mask


def test_norm_axes_and_static_bool():
    assert fusion.norm_axes(-1, 3) == (2,) and fusion.norm_axes((2, 1, -1), 3) == (1, 2)
    assert fusion.static_bool(np.bool_(True)) is True and fusion.static_bool(jnp.asarray(True)) is None

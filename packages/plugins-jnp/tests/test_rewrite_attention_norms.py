"""The rewrite stage's attention and LayerNorm rules on the forms libraries write (plain JAX written
as Hugging Face's Flax layers, Flax's and Equinox's norms, and hand-written code write them): each
becomes the ONNX op, matches JAX in onnxruntime at the default tolerances, and look-alikes (another
axis, another constant) stay as they are."""

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import to_onnx, verify
from jax2onnx.passes.rewrite import rewrites_applied

RNG = np.random.default_rng(0)
B, S, H, D = 2, 8, 4, 8
WQ, WK, WV = (RNG.standard_normal((H * D, H * D)).astype(np.float32) / 6 for _ in range(3))
WK2, WV2 = (RNG.standard_normal((H * D, 2 * D)).astype(np.float32) / 6 for _ in range(2))
GAMMA = np.linspace(0.5, 1.5, H * D).astype(np.float32)
BETA = np.linspace(-1, 1, H * D).astype(np.float32)


def _ops(model):
    return [n.op_type for n in model.graph.node]


def _check(fn, model, inputs):
    onnx.checker.check_model(model, full_check=True)
    report = verify(fn, model, inputs)
    assert report, report.failures()


def _heads(x, heads=H):
    return x.reshape(x.shape[0], x.shape[1], heads, D)


# ------------------------------------------------------------------------------------------ attention


def hf_flax_attention(x, bias):
    """HF Flax BERT/ViT: einsum scores over (b, q, h, d), an additive bias, einsum with values."""
    q, k, v = _heads(x @ WQ), _heads(x @ WK), _heads(x @ WV)
    q = q / jnp.sqrt(D).astype(jnp.float32)
    w = jnp.einsum("...qhd,...khd->...hqk", q, k) + bias
    w = jax.nn.softmax(w, axis=-1)
    out = jnp.einsum("...hqk,...khd->...qhd", w, v)
    return out.reshape(out.shape[:2] + (H * D,))


def causal_matmul_attention(x):
    """Hand-written: heads first, q @ k^T scaled after, a causal where, p @ v, heads back."""
    q, k, v = (jnp.swapaxes(_heads(x @ w), 1, 2) for w in (WQ, WK, WV))
    s = (q @ jnp.swapaxes(k, -1, -2)) * (1.0 / np.sqrt(D))
    causal = jnp.tril(jnp.ones((S, S), bool))
    s = jnp.where(causal, s, jnp.finfo(jnp.float32).min)
    p = jax.nn.softmax(s, axis=-1)
    out = jnp.swapaxes(p @ v, 1, 2)
    return out.reshape(out.shape[0], S, H * D)


def gqa_attention(x):
    """HF Flax Llama's GQA: 2 key/value heads repeated per group of queries (jnp.repeat)."""
    q, k, v = _heads(x @ WQ), _heads(x @ WK2, 2), _heads(x @ WV2, 2)
    k, v = jnp.repeat(k, H // 2, axis=2), jnp.repeat(v, H // 2, axis=2)
    w = jnp.einsum("...qhd,...khd->...hqk", q / np.float32(np.sqrt(D)), k)
    w = jax.nn.softmax(w, axis=-1)
    out = jnp.einsum("...hqk,...khd->...qhd", w, v)
    return out.reshape(out.shape[:2] + (H * D,))


def test_hf_flax_einsum_attention_with_its_bias_is_one_attention_op():
    model = to_onnx(hf_flax_attention, [("B", S, H * D), ("B", 1, 1, S)])
    ops = _ops(model)
    assert ops.count("Attention") == 1 and "Softmax" not in ops and "Einsum" not in ops
    assert rewrites_applied(model)["attention"] == 1
    bias = np.where(np.arange(S) < 6, 0.0, -1e9).astype(np.float32)[None, None, None].repeat(B, 0)
    _check(hf_flax_attention, model, [RNG.standard_normal((B, S, H * D)).astype(np.float32), bias])


def distilbert_attention(x, mask):
    """HF Flax DistilBERT: heads first, q / sqrt(d) @ k^T, masked by where(mask, s, min), which the
    lowering simplifies to s - (1 - mask) * big."""
    q, k, v = (jnp.swapaxes(_heads(x @ w), 1, 2) for w in (WQ, WK, WV))
    s = jnp.matmul(q / np.float32(np.sqrt(D)), jnp.swapaxes(k, 2, 3))
    s = s - (1.0 - mask.reshape(mask.shape[0], 1, 1, S).astype(jnp.float32)) * jnp.float32(1e9)
    out = jnp.matmul(jax.nn.softmax(s, axis=-1), v)
    return jnp.swapaxes(out, 1, 2).reshape(x.shape)


def test_distilbert_subtracted_mask_is_negated_once():
    model = to_onnx(distilbert_attention, [("B", S, H * D), jax.ShapeDtypeStruct(("B", S), jnp.int32)])
    assert _ops(model).count("Attention") == 1 and "Softmax" not in _ops(model)
    mask = np.ones((B, S), np.int32)
    mask[1, 5:] = 0
    _check(distilbert_attention, model, [RNG.standard_normal((B, S, H * D)).astype(np.float32), mask])


def test_a_scalar_bias_is_dropped():
    # BEiT without relative positions adds a constant 0 to the scores: softmax does not see it
    def beit_like(x):
        q, k, v = _heads(x @ WQ), _heads(x @ WK), _heads(x @ WV)
        w = jax.nn.softmax(jnp.einsum("...qhd,...khd->...hqk", q, k) + jnp.float32(0.0), axis=-1)
        return jnp.einsum("...hqk,...khd->...qhd", w, v).reshape(x.shape)

    model = to_onnx(beit_like, [("B", S, H * D)])
    (att,) = [n for n in model.graph.node if n.op_type == "Attention"]
    assert len(att.input) == 3
    _check(beit_like, model, [RNG.standard_normal((B, S, H * D)).astype(np.float32)])


def test_causal_where_attention_in_heads_first_layout():
    model = to_onnx(causal_matmul_attention, [("B", S, H * D)])
    assert _ops(model).count("Attention") == 1 and "Softmax" not in _ops(model)
    _check(causal_matmul_attention, model, [RNG.standard_normal((B, S, H * D)).astype(np.float32)])


def test_grouped_query_attention_keeps_its_kv_heads():
    model = to_onnx(gqa_attention, [("B", S, H * D)])
    (att,) = [n for n in model.graph.node if n.op_type == "Attention"]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in att.attribute}
    assert attrs["q_num_heads"] == H and attrs["kv_num_heads"] == 2
    assert "Gather" not in _ops(model)  # the repeat is the op's grouping now
    _check(gqa_attention, model, [RNG.standard_normal((B, S, H * D)).astype(np.float32)])


def test_before_opset_23_attention_stays_decomposed():
    model = to_onnx(hf_flax_attention, [("B", S, H * D), ("B", 1, 1, S)], opset=21)
    assert "Attention" not in _ops(model) and "Softmax" in _ops(model)


def test_attention_look_alikes_stay():
    def softmax_over_queries(x):  # normalised over the wrong axis
        q, k, v = _heads(x @ WQ), _heads(x @ WK), _heads(x @ WV)
        w = jax.nn.softmax(jnp.einsum("...qhd,...khd->...hqk", q, k), axis=-2)
        return jnp.einsum("...hqk,...khd->...qhd", w, v).reshape(x.shape)

    def weights_returned(x):  # the probabilities are an output: the decomposed form must stay
        q, k, v = _heads(x @ WQ), _heads(x @ WK), _heads(x @ WV)
        w = jax.nn.softmax(jnp.einsum("...qhd,...khd->...hqk", q, k), axis=-1)
        return jnp.einsum("...hqk,...khd->...qhd", w, v).reshape(x.shape), w

    x = RNG.standard_normal((B, S, H * D)).astype(np.float32)
    for fn in (softmax_over_queries, weights_returned):
        model = to_onnx(fn, [("B", S, H * D)])
        assert "Attention" not in _ops(model) and "attention" not in rewrites_applied(model), fn.__name__
        _check(fn, model, [x])


def test_tiled_keys_are_not_taken_for_groups():
    # jnp.tile repeats heads as 0,1,0,1, not the op's grouping (0,0,1,1): the keys stay tiled, H heads
    def tiled_keys(x):
        q, k, v = _heads(x @ WQ), _heads(x @ WK2, 2), _heads(x @ WV2, 2)
        k, v = jnp.tile(k, (1, 1, 2, 1)), jnp.tile(v, (1, 1, 2, 1))
        w = jax.nn.softmax(jnp.einsum("...qhd,...khd->...hqk", q, k), axis=-1)
        return jnp.einsum("...hqk,...khd->...qhd", w, v).reshape(x.shape)

    model = to_onnx(tiled_keys, [("B", S, H * D)])
    (att,) = [n for n in model.graph.node if n.op_type == "Attention"]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in att.attribute}
    assert attrs.get("kv_num_heads", H) == H
    _check(tiled_keys, model, [RNG.standard_normal((B, S, H * D)).astype(np.float32)])


# ------------------------------------------------------------------------------------------ layer norm


def centred_layer_norm(x):
    """Hand-written (HF-style): mean, centred variance, divide by the root, scale, shift."""
    m = jnp.mean(x, -1, keepdims=True)
    v = jnp.mean((x - m) ** 2, -1, keepdims=True)
    return (x - m) / jnp.sqrt(v + 1e-5) * GAMMA + BETA


def flax_moments_layer_norm(x):
    """flax.linen.LayerNorm's arithmetic: E[x^2] - E[x]^2 clipped at 0, rsqrt times the scale."""
    m = jnp.mean(x, -1, keepdims=True)
    var = jnp.maximum(0.0, jnp.mean(x * x, -1, keepdims=True) - m * m)
    return (x - m) * (jax.lax.rsqrt(var + 1e-6) * GAMMA) + BETA


def equinox_layer_norm(x):
    """equinox.nn.LayerNorm's arithmetic: jnp.var, max with 0, rsqrt, weight * out + bias."""
    m = jnp.mean(x, -1, keepdims=True)
    var = jnp.maximum(0.0, jnp.var(x, -1, keepdims=True))
    return GAMMA * ((x - m) * jax.lax.rsqrt(var + 1e-5)) + BETA


@pytest.mark.parametrize("fn", [centred_layer_norm, flax_moments_layer_norm, equinox_layer_norm],
                         ids=lambda f: f.__name__)
def test_hand_written_layer_norms_are_one_op(fn):
    model = to_onnx(fn, [("B", S, H * D)])
    assert _ops(model) == ["LayerNormalization"]
    assert rewrites_applied(model)["layer_norm"] == 1
    x = (RNG.standard_normal((B, S, H * D)) * 3 + 2).astype(np.float32)
    _check(fn, model, [x])


def test_layer_norm_look_alikes_stay():
    def other_axis(x):
        m = jnp.mean(x, -2, keepdims=True)
        v = jnp.mean((x - m) ** 2, -2, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5)

    def not_a_mean(x):  # sum / (n + 1)
        m = jnp.sum(x, -1, keepdims=True) / (H * D + 1)
        v = jnp.mean((x - m) ** 2, -1, keepdims=True)
        return (x - m) / jnp.sqrt(v + 1e-5)

    def per_row_eps(x, eps):  # eps a runtime value, not a constant
        m = jnp.mean(x, -1, keepdims=True)
        v = jnp.mean((x - m) ** 2, -1, keepdims=True)
        return (x - m) / jnp.sqrt(v + eps)

    x = RNG.standard_normal((B, S, H * D)).astype(np.float32)
    for fn, specs, args in ((other_axis, [("B", S, H * D)], [x]), (not_a_mean, [("B", S, H * D)], [x]),
                            (per_row_eps, [("B", S, H * D), ("B", S, 1)], [x, np.full((B, S, 1), 1e-5, np.float32)])):
        model = to_onnx(fn, specs)
        assert "LayerNormalization" not in _ops(model) and "layer_norm" not in rewrites_applied(model), fn.__name__
        _check(fn, model, args)


# ------------------------------------------------------------------------------------------ rotary

_INV = 1.0 / 10000 ** (np.arange(0, D, 2) / D)
_ANGLES = np.arange(64)[:, None] * _INV[None]
# HF Flax Llama's table: sin|cos of the angles repeated over both halves, (positions, 1, 2 * D)
SINCOS = np.concatenate([np.sin(_ANGLES), np.sin(_ANGLES), np.cos(_ANGLES), np.cos(_ANGLES)], -1)[:, None]
SINCOS = SINCOS.astype(np.float32)


def _rotate_half(x):
    return jnp.concatenate([-x[..., D // 2:], x[..., : D // 2]], axis=-1)


def llama_rotary(x, positions, table=SINCOS, rotate=_rotate_half):
    """HF Flax Llama: rows of the sin|cos table gathered by position, split, x*cos + rotate_half(x)*sin."""
    q = _heads(x @ WQ)
    sin, cos = jnp.split(jnp.asarray(table)[positions], 2, axis=-1)
    return (q * cos + rotate(q) * sin).reshape(x.shape)


def test_llama_rotary_is_one_op_with_position_ids():
    model = to_onnx(llama_rotary, [("B", S, H * D), jax.ShapeDtypeStruct(("B", S), jnp.int32)])
    ops = _ops(model)
    assert ops.count("RotaryEmbedding") == 1 and not {"Neg", "Concat", "Split"} & set(ops)
    assert rewrites_applied(model)["rotary_embedding"] == 1
    x = RNG.standard_normal((B, S, H * D)).astype(np.float32)
    positions = np.stack([np.arange(S), np.arange(S) + 7]).astype(np.int32)
    _check(llama_rotary, model, [x, positions])


def test_static_positions_use_the_three_d_caches():
    def fixed(x):
        return llama_rotary(x, jnp.broadcast_to(jnp.arange(S), (B, S)))

    model = to_onnx(fixed, [(B, S, H * D)])
    (rot,) = [n for n in model.graph.node if n.op_type == "RotaryEmbedding"]
    assert len(rot.input) == 3  # no position ids
    _check(fixed, model, [RNG.standard_normal((B, S, H * D)).astype(np.float32)])


def test_rotary_look_alikes_stay():
    uneven = SINCOS.copy()
    uneven[:, :, D // 2: D] += 0.5  # the sine table's halves differ: not a half-split rotation
    cases = {
        "wrong_sign": lambda x, p: llama_rotary(x, p, rotate=lambda q: jnp.concatenate(
            [q[..., D // 2:], -q[..., : D // 2]], axis=-1)),
        "uneven_table": lambda x, p: llama_rotary(x, p, table=uneven),
        "other_axis": lambda x, p: llama_rotary(x, p, rotate=lambda q: jnp.concatenate(
            [-q[:, :, H // 2:], q[:, :, : H // 2]], axis=2)),
    }
    x = RNG.standard_normal((B, S, H * D)).astype(np.float32)
    positions = np.stack([np.arange(S), np.arange(S) + 7]).astype(np.int32)
    for name, fn in cases.items():
        model = to_onnx(fn, [("B", S, H * D), jax.ShapeDtypeStruct(("B", S), jnp.int32)])
        assert "RotaryEmbedding" not in _ops(model) and "rotary_embedding" not in rewrites_applied(model), name
        _check(fn, model, [x, positions])

"""The rotary rule on the interleaved and partial forms: GPT-J's ``rotate_every_two`` and RoFormer's
pairwise rotation (pairs (x0, x1), (x2, x3), ... turned into (-x1, x0), ...) and the partial
rotation of GPT-J and GPT-NeoX (the first ``rotary_dim`` features rotate, the rest pass through a
Concat). Each becomes one ``RotaryEmbedding`` with ``interleaved`` / ``rotary_embedding_dim`` set,
matches JAX in onnxruntime at the default tolerances and passes the full checker; look-alikes
(another sign, another pairing, a table that is not repeated per pair, the pass-through first) stay."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import to_onnx, verify
from jax2onnx.passes.rewrite import rewrites_applied

RNG = np.random.default_rng(0)
B, S, H, D = 2, 8, 4, 8
W = RNG.standard_normal((H * D, H * D)).astype(np.float32) / 6
X = RNG.standard_normal((B, S, H * D)).astype(np.float32)
POSITIONS = np.stack([np.arange(S), np.arange(S) + 7]).astype(np.int32)


def _angles(dim):
    inv = 1.0 / 10000 ** (np.arange(0, dim, 2) / dim)
    return np.arange(64)[:, None] * inv[None]  # (positions, dim / 2)


def _pair_table(dim):
    """GPT-J's sin|cos table, each value twice side by side: (positions, 1, 2 * dim)."""
    a = _angles(dim)
    return np.concatenate([np.repeat(np.sin(a), 2, -1), np.repeat(np.cos(a), 2, -1)], -1)[:, None].astype(np.float32)


def _heads(x):
    return (x @ W).reshape(x.shape[0], x.shape[1], H, D)


def rotate_every_two(q):
    """GPT-J's (and RoFormer's) pairwise rotation: stack(-odd, even) merged back."""
    return jnp.stack((-q[..., 1::2], q[..., ::2]), axis=-1).reshape(q.shape)


def rotate_half(q):
    half = q.shape[-1] // 2
    return jnp.concatenate([-q[..., half:], q[..., :half]], axis=-1)


def rope(x, positions, dim=D, table=None, rotate=rotate_every_two, partial_first=True):
    """Hand-written RoPE over the first ``dim`` features of each head: rows of a sin|cos table
    gathered by position, ``q * cos + rotate(q) * sin``, the rest of the head passed through."""
    q = _heads(x)
    table = _pair_table(dim) if table is None else table
    sin, cos = jnp.split(jnp.asarray(table)[positions], 2, axis=-1)
    rot, rest = q[..., :dim], q[..., dim:]
    rot = rot * cos + rotate(rot) * sin
    if dim < D:
        rot = jnp.concatenate([rot, rest] if partial_first else [rest, rot], axis=-1)
    return rot.reshape(x.shape)


def _attrs(model):
    (node,) = [n for n in model.graph.node if n.op_type == "RotaryEmbedding"]
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}, node


def _check(fn, model, inputs):
    onnx.checker.check_model(model, full_check=True)
    report = verify(fn, model, inputs)
    assert report, report.failures()


IDS = jax.ShapeDtypeStruct(("B", S), jnp.int32)


def test_interleaved_rotation_with_position_ids():
    model = to_onnx(rope, [("B", S, H * D), IDS])
    attrs, node = _attrs(model)
    assert attrs["interleaved"] == 1 and "rotary_embedding_dim" not in attrs and len(node.input) == 4
    assert not {"Neg", "Concat", "Split", "Gather", "Slice"} & {n.op_type for n in model.graph.node}
    assert rewrites_applied(model)["rotary_embedding"] == 1
    _check(rope, model, [X, POSITIONS])


@pytest.mark.parametrize("rotate", [rotate_every_two, rotate_half], ids=["interleaved", "half"])
def test_partial_rotation_passes_the_rest_through(rotate):
    # GPT-J (interleaved) and GPT-NeoX (half-split) rotate the first rotary_dim features only
    dim = D // 2
    if rotate is rotate_half:
        a = _angles(dim)
        table = np.concatenate([np.sin(a), np.sin(a), np.cos(a), np.cos(a)], -1)[:, None].astype(np.float32)
    else:
        table = _pair_table(dim)

    def fn(x, p):
        return rope(x, p, dim=dim, table=table, rotate=rotate)

    model = to_onnx(fn, [("B", S, H * D), IDS])
    attrs, _ = _attrs(model)
    assert attrs["rotary_embedding_dim"] == dim and attrs.get("interleaved", 0) == (rotate is rotate_every_two)
    assert not {"Concat", "Slice"} & {n.op_type for n in model.graph.node}
    _check(fn, model, [X, POSITIONS])


def test_constant_rows_of_a_symbolic_batch_read_counted_positions():
    # positions 0..S-1 for every row (RoFormer's form): constant rows broadcast over a batch the
    # kernel needs in full, so the op gets (S, D/2) caches and ids expanded to the batch
    def fixed(x):
        return rope(x, jnp.arange(S)[None])

    model = to_onnx(fixed, [("B", S, H * D)])
    attrs, node = _attrs(model)
    assert attrs["interleaved"] == 1 and len(node.input) == 4
    _check(fixed, model, [X])
    static = to_onnx(fixed, [(B, S, H * D)])
    _, node = _attrs(static)
    assert len(node.input) == 3  # a static batch: the 3-D caches, no ids
    _check(fixed, static, [X])


def test_rotary_form_look_alikes_stay():
    uneven = _pair_table(D).copy()
    uneven[:, :, 0::2] += 0.25  # the sines differ within a pair: not what the op multiplies with
    cases = {
        "wrong_sign": dict(rotate=lambda q: jnp.stack((q[..., 1::2], -q[..., ::2]), -1).reshape(q.shape)),
        "swapped_pairs": dict(rotate=lambda q: jnp.stack((-q[..., ::2], q[..., 1::2]), -1).reshape(q.shape)),
        "uneven_table": dict(table=uneven),
        "pass_through_first": dict(dim=D // 2, table=_pair_table(D // 2), partial_first=False),
    }
    for name, kw in cases.items():
        def fn(x, p, kw=kw):
            return rope(x, p, **kw)

        model = to_onnx(fn, [("B", S, H * D), IDS])
        assert "RotaryEmbedding" not in {n.op_type for n in model.graph.node}, name
        assert "rotary_embedding" not in rewrites_applied(model), name
        _check(fn, model, [X, POSITIONS])


def test_rows_that_read_the_batch_size_as_data_stay():
    # the rows are scaled by the batch size: not the same table for every batch size
    def scaled(x):
        a = _angles(D)[:S]
        cos, sin = (jnp.asarray(np.repeat(f(a), 2, -1)[None, :, None].astype(np.float32)) for f in (np.cos, np.sin))
        n = jnp.asarray(x.shape[0], jnp.float32)
        q = _heads(x)
        return (q * (cos * n) + rotate_every_two(q) * (sin * n)).reshape(x.shape)

    model = to_onnx(scaled, [("B", S, H * D)])
    assert "RotaryEmbedding" not in {n.op_type for n in model.graph.node}
    _check(scaled, model, [X])


def test_before_opset_23_the_rotation_stays():
    model = to_onnx(rope, [("B", S, H * D), IDS], opset=21)
    assert "RotaryEmbedding" not in {n.op_type for n in model.graph.node}


# ------------------------------------------------------------------------ Hugging Face Flax models


@functools.cache  # one model per class: both batch parametrizations export the same weights
def _hf(config, model_cls, **kwargs):
    transformers = pytest.importorskip("transformers")
    cfg = getattr(transformers, config)(**kwargs)
    return getattr(transformers, model_cls)(cfg, seed=0)


@pytest.mark.parametrize("batch", ["B", 2])
def test_hf_flax_gptj_partial_interleaved_rotary(batch):
    # with the symbol B the table rows are jnp.take'n at positions broadcast to the batch (a fill
    # Where, a Split, a per-pair repeat): rows the same for each batch entry, read at counted ids
    model = _hf("GPTJConfig", "FlaxGPTJModel", vocab_size=100, n_embd=64, n_layer=2, n_head=4, rotary_dim=8,
                n_positions=64)

    def fn(ids):
        return model(ids, params=model.params).last_hidden_state

    ids = RNG.integers(3, 100, size=(2, 16)).astype(np.int32)
    onnx_model = to_onnx(fn, [jax.ShapeDtypeStruct((batch, 16), jnp.int32)])
    rotary = [n for n in onnx_model.graph.node if n.op_type == "RotaryEmbedding"]
    assert len(rotary) == 4  # q and k of both layers
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in rotary[0].attribute}
    assert attrs["interleaved"] == 1 and attrs["rotary_embedding_dim"] == 8 and attrs["num_heads"] == 4
    _check(fn, onnx_model, [ids])


@pytest.mark.parametrize("batch", ["B", 2])
def test_hf_flax_roformer_interleaved_rotary(batch):
    model = _hf("RoFormerConfig", "FlaxRoFormerModel", vocab_size=100, hidden_size=64, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=128, max_position_embeddings=64, embedding_size=64)

    def fn(ids, mask):
        return model(ids, attention_mask=mask, params=model.params).last_hidden_state

    ids = RNG.integers(3, 100, size=(2, 16)).astype(np.int32)
    mask = np.ones((2, 16), np.int32)
    mask[1, 12:] = 0
    spec = jax.ShapeDtypeStruct((batch, 16), jnp.int32)
    onnx_model = to_onnx(fn, [spec, spec])
    rotary = [n for n in onnx_model.graph.node if n.op_type == "RotaryEmbedding"]
    assert len(rotary) == 4 and "Einsum" not in {n.op_type for n in onnx_model.graph.node}
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in rotary[0].attribute}
    assert attrs["interleaved"] == 1 and "rotary_embedding_dim" not in attrs
    _check(fn, onnx_model, [ids, mask])

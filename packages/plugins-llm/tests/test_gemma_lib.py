"""Google's ``gemma`` library (PyPI ``gemma``): a tiny Gemma 2/3-style Linen transformer built from the
library's own config with random params exports with ``params=`` and generates the library's greedy
tokens in onnxruntime-genai, alone and in a left-padded batch, every layer's attention fused.

The reference is the library's forward pass step by step (``model.apply`` over the growing sequence,
right-padded with its pad id 0, which its causal mask never lets a real token see; argmax each step).
The tiny model has every option the library's Gemma 2/3 configs have: grouped-query attention,
sliding (window shorter than prompt + generation) and global layers with their own RoPE base and
scale, query/key norms, post-attention / post-feed-forward norms, attention and final soft caps."""

from __future__ import annotations

import numpy as np
import pytest

gm_nn = pytest.importorskip("gemma.gm.nn", reason="the gemma library (pip install gemma) is not installed")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from llm_test_helpers import NEW_TOKENS, assert_same_tokens, check_folder, op_counts, require_genai  # noqa: E402

from jax2onnx_llm import export_causal_lm  # noqa: E402
from jax2onnx_llm.attention_report import attention_fusions  # noqa: E402

LAYERS = 3
PAD, EOS = 0, 1


def tiny_gemma():
    from gemma.gm.nn import _config, _modules

    local, full = _modules.AttentionType.LOCAL_SLIDING, _modules.AttentionType.GLOBAL
    config = _config.TransformerConfig(
        num_embed=256, embed_dim=64, hidden_dim=128, num_heads=4, head_dim=16, num_kv_heads=2,
        final_logit_softcap=30.0, use_post_attn_norm=True, use_post_ffw_norm=True,
        attention_types=(local, full, local), attn_logits_soft_cap=2.0, sliding_window_size=6, use_qk_norm=True,
        local_base_frequency=10_000, global_base_frequency=1_000_000, global_scale_factor=8.0,
    )
    model = gm_nn.Transformer(config=config, dtype=jnp.float32)
    params = model.init(jax.random.PRNGKey(0), jnp.ones((1, 8), jnp.int32))
    # the init's norms are zeros (scale 1): random ones, so every norm matters; a smaller embedding
    # table, so the tied head does not just echo the last token
    def noisy(path, a, key):
        scale = 0.1 if "embedder" in jax.tree_util.keystr(path) else 1.0
        return scale * (a + 0.5 * jax.random.normal(key, a.shape, a.dtype))

    leaves, tree = jax.tree_util.tree_flatten_with_path(params)
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    return model, jax.tree_util.tree_unflatten(tree, [noisy(p, a, k) for (p, a), k in zip(leaves, keys)])


def library_greedy(model, params, prompts):
    """The library's greedy tokens: its forward pass over each whole sequence so far, per step."""
    width = max(len(p) for p in prompts) + NEW_TOKENS
    tokens = np.full((len(prompts), width), PAD, np.int32)
    lengths = np.array([len(p) for p in prompts])
    for row, p in enumerate(prompts):
        tokens[row, : len(p)] = p
    forward = jax.jit(lambda t: model.apply(params, t).logits)
    for _ in range(NEW_TOKENS):
        logits = np.asarray(forward(tokens))
        nxt = logits[np.arange(len(prompts)), lengths - 1].argmax(-1)
        assert (nxt != PAD).all(), "the tiny model generated the pad id, which the library reads as padding"
        tokens[np.arange(len(prompts)), lengths] = nxt
        lengths += 1
    return [tokens[row, len(p): len(p) + NEW_TOKENS].tolist() for row, p in enumerate(prompts)]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    model, params = tiny_gemma()
    folder = export_causal_lm(model, tmp_path_factory.mktemp("gemma_lib") / "m", params=params, max_length=64,
                              eos_token_id=EOS, pad_token_id=PAD, tokenizer=False)
    return model, params, folder


def test_gemma_library_greedy_tokens_in_genai(exported):
    model, params, folder = exported
    require_genai()
    check_folder(folder)
    assert_same_tokens(folder, lambda prompts: library_greedy(model, params, prompts), PAD, EOS)


def test_every_layer_fuses_to_group_query_attention(exported):
    _, _, folder = exported
    ops = op_counts(folder)
    assert ops.get(("com.microsoft", "GroupQueryAttention"), 0) == LAYERS, ops
    assert [entry["fused"] for entry in attention_fusions(folder)] == ["com.microsoft.GroupQueryAttention"] * LAYERS


def test_params_are_required():
    from jax2onnx_llm import UnsupportedModelError

    model, _ = tiny_gemma()
    with pytest.raises(UnsupportedModelError, match="params=params"):
        export_causal_lm(model, "unused", max_length=16, tokenizer=False)

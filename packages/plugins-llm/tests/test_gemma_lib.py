"""Google's ``gemma`` library (PyPI ``gemma``): a tiny Gemma 2/3-style Linen transformer built from the
library's own config with random params exports with ``params=`` and generates the library's greedy
tokens in onnxruntime-genai, alone and in a left-padded batch, every layer's attention fused; the
library's SentencePiece tokenizer (a tiny one trained here) is written so genai encodes as it does.

References: the library's ``gm.text.Sampler`` (greedy) on texts, and its forward pass step by step
(``model.apply`` over the growing sequence, right-padded with its pad id 0, which its causal mask
never lets a real token see; argmax each step) on the shared token prompts. The tiny model has every
option of the library's Gemma 2/3 configs: grouped-query attention, sliding layers (window shorter
than prompt + generation) and global layers with their own RoPE base and scale, query/key norms,
post-attention / post-feed-forward norms, attention and final soft caps; the ablation test shows
that dropping each one that can change a greedy token changes the library's own tokens."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
import numpy as np
import pytest
from gemma_lib_helpers import (
    EOS,
    PAD,
    VOCAB,
    gemma_param_in_this_module_only,  # noqa: F401 - the library's Module.param while this module runs
    gm,
    library_greedy,
    random_params,
    sampler_tokens,
    tiny_tokenizer,
)
from jax2onnx_llm import UnsupportedModelError, export_causal_lm
from jax2onnx_llm.attention_report import attention_fusions
from jax2onnx_llm.frontends import decoder_spec
from jax2onnx_llm.genai_run import left_pad
from jax2onnx_llm.reference import greedy_generate
from llm_test_helpers import (
    NEW_TOKENS,
    PROMPTS,
    assert_fused_attention,
    assert_same_tokens,
    built_once,
    check_folder,
    op_counts,
    require_genai,
)

LAYERS = 3
END_OF_TURN = 107  # the library's Gemma 2 tokenizer's
TEXTS = ["Hello world! How are", "The lazy dog", "Numbers 12345 and symbols #@! are here, said the fox"]


def tiny_config(**changes):
    from gemma.gm.nn import _config, _modules

    local, full = _modules.AttentionType.LOCAL_SLIDING, _modules.AttentionType.GLOBAL
    config = _config.TransformerConfig(
        num_embed=VOCAB, embed_dim=64, hidden_dim=128, num_heads=4, head_dim=16, num_kv_heads=2,
        final_logit_softcap=30.0, use_post_attn_norm=True, use_post_ffw_norm=True,
        attention_types=(local, full, local), attn_logits_soft_cap=2.0, sliding_window_size=6, use_qk_norm=True,
        local_base_frequency=10_000, global_base_frequency=1_000_000, global_scale_factor=8.0,
    )
    return dataclasses.replace(config, **changes)


def tiny_gemma(**changes):
    """The library's transformer with random params."""
    model = gm.nn.Transformer(config=tiny_config(**changes), dtype=jnp.float32)
    return model, random_params(model)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    model, params = tiny_gemma()
    tokenizer = tiny_tokenizer(tmp_path_factory.mktemp("spm"))

    def build(root):  # once per session, not per xdist worker
        export_causal_lm(model, root / "m", params=params, max_length=96, tokenizer=tokenizer,
                         eos_token_id=[EOS, END_OF_TURN])

    return model, params, tokenizer, built_once("test_gemma_lib", build)[0] / "m"


def test_gemma_library_greedy_tokens_in_genai(exported):
    model, params, _, folder = exported
    require_genai()
    check_folder(folder)
    assert_same_tokens(folder, lambda prompts: library_greedy(model, params, prompts), PAD, [EOS, END_OF_TURN])


def test_the_library_sampler_on_texts_and_genai_agree(exported):
    """Texts: genai's tokenizer (the written tokenizer.json) encodes them as the library does (genai
    0.18's ``encode`` adds no BOS: it goes first, as the library's sampler puts it), and genai
    generates the library Sampler's greedy tokens for the batch (the library pads it on the right,
    genai on the left)."""
    from jax2onnx_llm.genai_run import greedy, until_eos

    og = require_genai()
    model, params, tokenizer, folder = exported
    encoder = og.Tokenizer(og.Model(str(folder)))
    odd = ["  two  spaces", "tabs\tand\nlines", "ünïcödé 😀", " 007 x"]
    for text in TEXTS + odd:
        assert [int(i) for i in encoder.encode(text)] == [int(i) for i in tokenizer.encode(text)], text
    ids = [[2, *(int(i) for i in encoder.encode(text))] for text in TEXTS]
    assert ids == [[int(i) for i in tokenizer.encode(text, add_bos=True)] for text in TEXTS]
    expected = sampler_tokens(model, params, tokenizer, TEXTS, [EOS, END_OF_TURN])
    got = greedy(folder, ids, NEW_TOKENS)
    assert [until_eos(row, [EOS, END_OF_TURN]) for row in got] == expected
    assert min(len(set(row)) for row in expected) > 3, f"the tiny model repeats itself: {expected}"


def test_the_step_outside_an_export_gives_the_library_tokens(exported):
    """The adapter's step run as JAX (the pack's jitted greedy loop, its cache of explicit length: the
    attention's plain path, not the region) generates the library's tokens, left-padded too."""
    model, params, _, _ = exported
    got = np.asarray(greedy_generate(decoder_spec(model, params=params), *left_pad(PROMPTS, PAD), NEW_TOKENS))
    assert got.tolist() == library_greedy(model, params, PROMPTS)


@pytest.mark.parametrize("changes", [
    {"num_kv_heads": 4},  # multi-head attention: the library's fused qkv_einsum
    {"transpose_gating_einsum": True, "use_post_attn_norm": False, "use_post_ffw_norm": False, "use_qk_norm": False},
    {"query_pre_attn_norm": "BY_EMBED_DIM_DIV_NUM_HEADS", "final_logit_softcap": None},
], ids=["mha", "gemma1_layout", "scalar"])
def test_the_other_config_forms_step_as_the_library(changes):
    """The config forms the exported model does not have, through the adapter's step as plain JAX
    (the attention region is the same; these change only what the library's own modules compute)."""
    from gemma.gm.nn import _config

    if "query_pre_attn_norm" in changes:
        changes = {**changes, "query_pre_attn_norm": _config.QueryPreAttentionNormalisation[changes["query_pre_attn_norm"]]}
    model, params = tiny_gemma(**changes)
    got = np.asarray(greedy_generate(decoder_spec(model, params=params), *left_pad(PROMPTS, PAD), NEW_TOKENS))
    assert got.tolist() == library_greedy(model, params, PROMPTS)


def test_every_layer_fuses_to_group_query_attention(exported):
    *_, folder = exported
    ops = op_counts(folder)
    assert ops.get(("com.microsoft", "GroupQueryAttention"), 0) == LAYERS, ops
    assert [entry["fused"] for entry in attention_fusions(folder)] == ["com.microsoft.GroupQueryAttention"] * LAYERS


def test_standard_onnx_shared_cache_gives_the_library_tokens(exported, tmp_path):
    """``target="onnx"``: every layer the opset-23 ``Attention`` (soft cap and window included), the
    static shared cache scattered into; the same library tokens."""
    model, params, _, _ = exported
    folder = export_causal_lm(model, tmp_path / "onnx", params=params, max_length=96, target="onnx", cache="shared",
                              tokenizer=False, eos_token_id=[EOS, END_OF_TURN])
    check_folder(folder)
    assert_fused_attention(folder, "onnx", LAYERS, rotary=None, cache="shared")
    assert_same_tokens(folder, lambda prompts: library_greedy(model, params, prompts), PAD, [EOS, END_OF_TURN])


@pytest.mark.parametrize("dropped", [{"sliding_window_size": 1000}, {"attn_logits_soft_cap": None},
                                     {"global_scale_factor": 1.0}, {"use_qk_norm": False}])
def test_each_option_changes_the_library_tokens(exported, dropped):
    """The tiny model's options are not idle: without each, the library itself generates other tokens
    (so the export, which generates its tokens, computes each)."""
    model, params, _, _ = exported
    variant = gm.nn.Transformer(config=tiny_config(**dropped), dtype=jnp.float32)
    kept = params if "use_qk_norm" not in dropped else {  # without the query/key norms' weights
        k: {**v, "attn": {n: w for n, w in v["attn"].items() if not n.endswith("_norm")}} if k.startswith("layer_")
        else v for k, v in params.items()}
    assert library_greedy(variant, kept, PROMPTS[:1]) != library_greedy(model, params, PROMPTS[:1])


def test_params_are_required():
    model, _ = tiny_gemma()
    with pytest.raises(UnsupportedModelError, match="params=params"):
        export_causal_lm(model, "unused", max_length=16, tokenizer=False)


def test_gemma4_is_refused_by_name(monkeypatch):
    """gemma 4.x (Python >= 3.12) cannot be imported here: its Gemma 4 transformer class stands in, in
    the module the front-end looks it up in; the export names it and the fix."""
    import sys
    import types

    class Gemma4_E2B:  # noqa: N801 - the library's class name
        pass

    monkeypatch.setitem(sys.modules, "gemma.gm.nn.gemma4._transformer", types.SimpleNamespace(Transformer=Gemma4_E2B))
    with pytest.raises(UnsupportedModelError, match=r"Gemma4_E2B \(Gemma 4\) is not exported.*Gemma4CausalLM"):
        export_causal_lm(Gemma4_E2B(), "unused", max_length=16, params={}, tokenizer=False)


def test_a_tokenizer_normalizing_otherwise_than_gemma_is_refused(exported, tmp_path):
    from jax2onnx_llm import TokenizerError

    model, params, _, _ = exported
    prefixed = tiny_tokenizer(tmp_path, add_dummy_prefix=True)
    with pytest.raises(TokenizerError, match=r"unlike Gemma's \(add_dummy_prefix=True\)"):
        export_causal_lm(model, tmp_path / "m", params=params, max_length=16, tokenizer=prefixed)
    assert not (tmp_path / "m").exists()

"""Google's ``gemma`` library's Gemma 3n (``gm.nn.Gemma3n_E2B``'s own config, shrunk): exported with
``params=``, it generates in onnxruntime-genai the library's greedy tokens, alone and in a left-padded
batch (its forward pass step by step), and its ``gm.text.Sampler``'s greedy tokens on texts (the
sampler's cached path: the KV-shared layer reading its source layer's cache), the texts encoded by
the written ``Gemma3nTokenizer`` (a tiny SentencePiece model trained here) as the library encodes them.

The tiny model keeps every Gemma 3n option of the E2B config: AltUp (4 streams, coefficient clip),
LAuReL, per-layer inputs, activation sparsity in the first layer, value norm, query/key norms without
the +1 on their scales, KV sharing (layer 2, sliding, reads layer 0's keys and values), sliding
(window 6, shorter than prompt + generation) and global layers with their own RoPE bases; three
layers at width 64, the fewest with a KV-shared layer of the same kind as its source."""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp
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
from jax2onnx_llm import export_causal_lm
from jax2onnx_llm.attention_report import attention_fusions
from llm_test_helpers import NEW_TOKENS, PROMPTS, assert_same_tokens, built_once, check_folder, op_counts, require_genai

END_OF_TURN = 106  # the library's Gemma 3n tokenizer's
LAYERS, HOLDERS = 3, 2  # layer 2 shares layer 0's cache: the folder carries two layers' keys and values
SEED = 4  # the random params' tokens vary and hit neither the pad nor an end id within NEW_TOKENS
TEXTS = ["Hello world! How are", "The lazy dog", "Numbers 12345 and symbols #@! are here, said the fox"]


def tiny_gemma3n():
    from gemma.gm.nn.gemma3n import _config, _modules

    local, full = _modules.AttentionType.LOCAL_SLIDING, _modules.AttentionType.GLOBAL
    config = dataclasses.replace(
        gm.nn.Gemma3n_E2B.config, vision_encoder=None, num_embed=VOCAB, embed_dim=64, hidden_dim=128, num_heads=4,
        head_dim=16, num_kv_heads=2, attention_types=(local, full, local), sliding_window_size=6,
        activation_sparsity_pattern=(0.95, 0.0, 0.0), per_layer_input_dim=8, laurel_rank=8,
        kv_cache_sharing_config=_config.KVCacheSharingConfig(frac_shared_layers=1 / 3, share_global=True,
                                                             share_local=True),
    )
    model = gm.nn.Gemma3n_E2B(config=config, text_only=True, dtype=jnp.float32)
    return model, random_params(model, seed=SEED)



@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    model, params = tiny_gemma3n()
    tokenizer = tiny_tokenizer(tmp_path_factory.mktemp("spm"), gm.text.Gemma3nTokenizer)

    def build(root):  # once per session, not per xdist worker
        export_causal_lm(model, root / "m", params=params, max_length=96, tokenizer=tokenizer)

    return model, params, tokenizer, built_once("test_gemma_lib_gemma3n", build)[0] / "m"


@pytest.fixture(scope="module")
def library_tokens(exported):
    """The library forward pass's greedy tokens for the shared prompts (right-padded, its rows
    independent: the batch's first row is the first prompt's generation alone, so one batch serves)."""
    model, params, _, _ = exported
    expected = built_once("gemma3n-library-tokens", lambda _: library_greedy(model, params, PROMPTS))[1]
    return lambda prompts: expected[: len(prompts)]


def test_gemma3n_greedy_tokens_in_genai(exported, library_tokens):
    """genai's tokens, alone and left-padded, are the library's; every layer's attention is fused, the
    KV-shared one's too, and the folder carries the cache of the layers computing keys and values."""
    *_, folder = exported
    require_genai()
    config = check_folder(folder)
    assert config["model"]["decoder"]["num_hidden_layers"] == HOLDERS
    assert [entry["fused"] for entry in attention_fusions(folder)] == ["com.microsoft.GroupQueryAttention"] * LAYERS
    assert_same_tokens(folder, library_tokens, PAD, [EOS, END_OF_TURN])


def test_standard_onnx_growing_cache_gives_the_library_tokens(exported, library_tokens, tmp_path):
    """``target="onnx"`` with the growing cache: every layer the opset-23 ``Attention``, the KV-shared
    layer's over its source's past and step keys concatenated (no past input: its present would be
    pruned, which onnxruntime refuses); the same library tokens."""
    model, params, _, _ = exported
    folder = export_causal_lm(model, tmp_path / "onnx", params=params, max_length=96, target="onnx", cache="concat",
                              tokenizer=False)
    check_folder(folder)
    assert op_counts(folder).get(("", "Attention"), 0) == LAYERS
    assert_same_tokens(folder, library_tokens, PAD, [EOS, END_OF_TURN])


def test_the_library_sampler_and_genai_agree(exported):
    """The library's ``gm.text.Sampler`` (greedy, its own cache) on a batch of texts, and genai on the
    ids its written tokenizer encodes them to, BOS first as the sampler puts it (the sampler pads on the
    right, genai on the left)."""
    from jax2onnx_llm.genai_run import greedy, until_eos

    og = require_genai()
    model, params, tokenizer, folder = exported
    encoder = og.Tokenizer(og.Model(str(folder)))
    ids = [[2, *(int(i) for i in encoder.encode(text))] for text in TEXTS]
    assert ids == [[int(i) for i in tokenizer.encode(text, add_bos=True)] for text in TEXTS]
    expected = sampler_tokens(model, params, tokenizer, TEXTS, [EOS, END_OF_TURN])
    assert min(len(set(row)) for row in expected) > 3, f"the tiny model repeats itself: {expected}"
    assert [until_eos(row, [EOS, END_OF_TURN]) for row in greedy(folder, ids, NEW_TOKENS)] == expected

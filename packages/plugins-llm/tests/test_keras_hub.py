"""KerasHub CausalLM models under the JAX backend (tiny backbones built from config, no presets):
onnxruntime-genai's greedy tokens equal KerasHub's own greedy ``generate``."""

from __future__ import annotations

import numpy as np
import pytest
from jax2onnx_llm import export_causal_lm
from llm_test_helpers import (
    ATTENTION_OP,
    GQA_OP,
    NEW_TOKENS,
    PROMPTS,
    assert_fused_attention,
    assert_layer_fusions,
    assert_same_tokens,
    check_folder,
    keras_fingerprint,
    keras_hub_under_jax,
    remembered,
)

keras, keras_hub = keras_hub_under_jax()


def make(family: str):
    keras.utils.set_random_seed(0)
    if family == "gpt2":
        backbone = keras_hub.models.GPT2Backbone(vocabulary_size=128, num_layers=2, num_heads=4, hidden_dim=32,
                                                 intermediate_dim=64, max_sequence_length=128)
        model = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    elif family == "gemma":
        backbone = keras_hub.models.GemmaBackbone(vocabulary_size=128, num_layers=2, num_query_heads=4,
                                                  num_key_value_heads=2, hidden_dim=32, intermediate_dim=64, head_dim=8)
        model = keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=None)
    else:  # "llama"; "wide_llama": head size 16, which GroupQueryAttention rotates itself
        hidden = 64 if family == "wide_llama" else 32
        backbone = keras_hub.models.LlamaBackbone(vocabulary_size=128, num_layers=2, num_query_heads=4,
                                                  num_key_value_heads=2, hidden_dim=hidden, intermediate_dim=64)
        model = keras_hub.models.LlamaCausalLM(backbone=backbone, preprocessor=None)
    # Small random blocks leave the tied embedding in charge (one token forever): scale them up
    # (and GPT-2's position table) so greedy sequences vary.
    for v in backbone.weights:
        if "position_embedding" in v.path:
            v.assign(v.numpy() * 6.0)
        elif "kernel" in v.path:
            v.assign(v.numpy() * 6.0 if family.endswith("llama") else v.numpy() * 3.0)
    model.compile(sampler="greedy")  # CausalLM's default sampler is top-k
    return model


def keras_reference(model):
    def reference(prompts):
        # KerasHub's layout: prompts right-padded into a buffer the generated tokens fill.
        length = max(len(p) for p in prompts) + NEW_TOKENS
        ids = np.zeros((len(prompts), length), np.int32)
        mask = np.zeros((len(prompts), length), bool)
        for row, p in enumerate(prompts):
            ids[row, : len(p)], mask[row, : len(p)] = p, True
        out = np.asarray(model.generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)["token_ids"])
        return np.stack([out[row, len(p) : len(p) + NEW_TOKENS] for row, p in enumerate(prompts)])

    # the tokens of each model (same classes, configs and weights: one per family) computed once a session
    return remembered(reference, "keras_generate", keras_fingerprint(model))


@pytest.mark.parametrize("target", ["onnxruntime", "onnx"])
@pytest.mark.parametrize("cache", ["concat", "shared"])
@pytest.mark.parametrize("family", ["gpt2", "gemma", "llama"])
def test_generates_the_library_tokens(tmp_path, family, cache, target):
    model = make(family)
    reference = keras_reference(model)
    # Without a preprocessor the model names no special tokens; they are given here, the end token
    # one this model does not generate for these prompts, so all NEW_TOKENS are compared.
    seen = set(np.asarray(reference(PROMPTS)).ravel()) | set(np.asarray(reference(PROMPTS[:1])).ravel())
    eos = next(t for t in range(1, 128) if t not in seen)
    folder = export_causal_lm(model, tmp_path / family, max_length=64, cache=cache, target=target,
                              eos_token_id=eos, pad_token_id=0)
    config = check_folder(folder)
    assert config["model"]["eos_token_id"] == eos and config["model"]["pad_token_id"] == 0
    # each decoder layer's attention became one fused attention (head size 8: RoPE by a
    # RotaryEmbedding op on q and k; GPT-2 has none)
    assert_fused_attention(folder, target, 2, rotary=None if family == "gpt2" else "op", cache=cache)
    # ... and the export's report names it per layer (the whole-layer region tagged its node)
    assert_layer_fusions(folder, [GQA_OP if target == "onnxruntime" else ATTENTION_OP] * 2)
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)


@pytest.mark.parametrize("cache", ["concat", "shared"])
def test_group_query_attention_rotates_itself(tmp_path, cache):
    model = make("wide_llama")
    reference = keras_reference(model)
    seen = set(np.asarray(reference(PROMPTS)).ravel()) | set(np.asarray(reference(PROMPTS[:1])).ravel())
    eos = next(t for t in range(1, 128) if t not in seen)
    folder = export_causal_lm(model, tmp_path / "wide", max_length=64, cache=cache, target="onnxruntime",
                              eos_token_id=eos, pad_token_id=0)
    check_folder(folder)
    assert_fused_attention(folder, "onnxruntime", 2, rotary="gqa")
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)

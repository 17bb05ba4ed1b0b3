"""KerasHub's Gemma 3n and Gemma 4 (text; ``frontends/keras_hub/gemma_family``): tiny random models
with every option their backbones have for text, exported once per class and generated in
onnxruntime-genai, whose greedy tokens must equal KerasHub's own ``generate`` for one prompt and a
left-padded batch of three. Windows of 4 tokens: prompts of 3-7 tokens and 32 generated run far
past them. (Dropping a window or a soft cap in the export changes the tokens or logits:
test_feature_ablation.py.)"""

from __future__ import annotations

import json

import numpy as np
import pytest
from jax2onnx_llm import export_causal_lm
from llm_test_helpers import (
    ATTENTION_OP,
    GQA_OP,
    PROMPTS,
    assert_layer_fusions,
    assert_same_tokens,
    built_once,
    check_folder,
    keras_hub_under_jax,
)

keras, keras_hub = keras_hub_under_jax()

M = keras_hub.models
VOCAB = 128


def gemma4():
    """Four layers (the fewest with sliding and global layers both KV-shared), sliding and global
    alternating; the last two share the keys and values of the last layer of their kind. Sliding layers: head size 8, two KV heads, rope wavelength 1000 scaled by 2;
    global layers: head size 16, one KV head with keys as values, rope wavelength 50 on half of each
    head. Per-layer inputs of 8, attention soft cap 5, final soft cap 1, the shared layers' MLP double
    wide, and a mixture of 4 experts (top 2) beside every MLP."""
    return M.Gemma4CausalLM(preprocessor=None, backbone=M.Gemma4Backbone(
        vocabulary_size=VOCAB, image_size=16, num_layers=4, num_query_heads=4, num_key_value_heads=2, hidden_dim=32,
        intermediate_dim=64, head_dim=8, global_head_dim=16, num_global_key_value_heads=1,
        layer_types=["sliding_attention", "full_attention"] * 2, sliding_window_size=4, num_kv_shared_layers=2,
        hidden_size_per_layer_input=8, local_rope_wavelength=1000.0, local_rope_scaling_factor=2.0,
        global_rope_wavelength=50.0, global_rope_partial_rotary_factor=0.5, attention_logit_soft_cap=5.0,
        final_logit_soft_cap=1.0, use_double_wide_mlp=True, enable_moe_block=True, num_experts=4,
        expert_intermediate_dim=16, num_experts_per_token=2))


def gemma3n():
    """Four layers, sliding (window 4, rope base 10000) and global (rope base 10^6, both scaled by 2)
    alternating, the last two KV-shared; AltUp over 2 streams (coefficients clipped at 5), LAuReL of
    rank 4, per-layer inputs of 8, the first layer's activations sparse (95th percentile), final soft cap 0.25 (its logits are small)."""
    return M.Gemma3nCausalLM(preprocessor=None, backbone=M.Gemma3nBackbone(
        text_vocab_size=VOCAB, text_hidden_size=32, num_hidden_layers=4, pad_token_id=0, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, intermediate_size=[64] * 4, hidden_activation="gelu_approximate",
        layer_types=["sliding_attention", "full_attention"] * 2, sliding_window=4, rope_theta=1_000_000.0,
        rope_local_base_freq=10_000.0, rope_scaling=2.0, max_position_embeddings=128, vocab_size_per_layer_input=VOCAB,
        hidden_size_per_layer_input=8, altup_num_inputs=2, altup_coef_clip=5.0, laurel_rank=4, num_kv_shared_layers=2,
        final_logit_soft_cap=0.25, activation_sparsity_pattern=[0.95, 0.0, 0.0, 0.0]))


BUILDERS = {"gemma4": gemma4, "gemma3n": gemma3n}


def make(family: str):
    keras.utils.set_random_seed(0)
    model = BUILDERS[family]()
    for v in model.backbone.weights:  # larger blocks, so that greedy sequences vary
        if "kernel" in v.path:
            v.assign(v.numpy() * 3.0)
    model.compile(sampler="greedy")
    return model


def decoder_blocks(model):
    backbone = model.backbone
    return list(getattr(backbone, "language_model", backbone).transformer_layers)


@pytest.fixture(scope="module", params=list(BUILDERS))
def exported(request):
    """``(family, model, reference, eos, folder)``: the model exported once per session (growing cache)."""
    from test_keras_hub_families import keras_reference

    family = request.param
    model = make(family)
    reference = keras_reference(model)
    seen = {int(t) for p in (PROMPTS, PROMPTS[:1]) for t in np.asarray(reference(p)).ravel()}
    eos = next(t for t in range(1, VOCAB) if t not in seen)

    return family, model, reference, eos, exported_once(family, model, eos)


def exported_once(family: str, model, eos: int):
    """``model`` (``make(family)``) exported with the growing cache and end token ``eos``: once a
    session for this module and test_feature_ablation.py (which checks it with each feature dropped)."""
    def build(root):
        export_causal_lm(model, root / family, max_length=64, cache="concat", eos_token_id=eos, pad_token_id=0)

    return built_once(f"test_keras_hub_gemma-{family}-{eos}", build)[0] / family


def test_the_config_has_every_option(exported):
    """The test model is what the docstrings say: KV-shared layers, per-layer inputs, sliding and
    global layers with their own head sizes / rope settings (else the token test covers less)."""
    family, model, _, _, _ = exported
    blocks = decoder_blocks(model)
    attention = [b.attention for b in blocks]
    assert sum(bool(a.is_kv_shared_layer) for a in attention) == 2
    if family == "gemma4":
        bb = model.backbone
        assert bb.hidden_size_per_layer_input > 0 and bb.final_logit_soft_cap and bb.attention_logit_soft_cap
        sliding = [b for b in blocks if not b.is_global_attention]
        full = [b for b in blocks if b.is_global_attention]
        assert all(b.use_sliding_window_attention for b in sliding) and not any(b.use_sliding_window_attention for b in full)
        assert {a.head_dim for a in (b.attention for b in sliding)} != {a.head_dim for a in (b.attention for b in full)}
    else:
        text = model.backbone.language_model
        assert text.hidden_size_per_layer_input > 0 and text.altup_num_inputs > 1 and text.laurel_rank > 0
        assert [a.sliding_window for a in attention] == [4, None, 4, None]
        assert len({a.rope_max_wavelength for a in attention}) == 2


def test_generates_the_library_tokens(exported):
    """GroupQueryAttention in every layer; the folder carries a cache only for the layers that compute
    keys and values (genai_config.json's num_hidden_layers); KerasHub's tokens alone and padded."""
    family, model, reference, eos, folder = exported
    config = check_folder(folder)
    holders = [b for b in decoder_blocks(model) if not b.attention.is_kv_shared_layer]
    assert config["model"]["decoder"]["num_hidden_layers"] == len(holders)
    assert_layer_fusions(folder, [GQA_OP] * len(decoder_blocks(model)))
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)


def test_shared_buffer_and_standard_onnx(exported, tmp_path):
    """The static cache buffer with standard ONNX only (opset-23 Attention): the same tokens, and the
    model left as it was."""
    family, model, reference, eos, _ = exported
    folder = export_causal_lm(model, tmp_path / family, max_length=64, cache="shared", target="onnx",
                              eos_token_id=eos, pad_token_id=0)
    check_folder(folder)
    assert json.loads((folder / "genai_config.json").read_text())["search"]["past_present_share_buffer"]
    assert_layer_fusions(folder, [ATTENTION_OP] * len(decoder_blocks(model)))
    touched = {"call", "call_with_cache", "_compute_attention_mask", "_compute_attention"}
    assert not [o for o in [model, *model.backbone._flatten_layers()] if touched & set(vars(o))]
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)


def test_gemma4_per_layer_table_shorter_than_the_vocabulary_is_refused(tmp_path):
    """KerasHub looks every token up in the per-layer input table: one shorter than the vocabulary has
    no entry for the last tokens, so the export refuses it, naming the fix (and writes nothing)."""
    from jax2onnx_llm.errors import UnsupportedModelError

    keras.utils.set_random_seed(0)
    model = M.Gemma4CausalLM(preprocessor=None, backbone=M.Gemma4Backbone(
        vocabulary_size=VOCAB, image_size=16, num_layers=2, num_query_heads=2, num_key_value_heads=1, hidden_dim=16,
        intermediate_dim=32, head_dim=8, hidden_size_per_layer_input=4, vocab_size_per_layer_input=VOCAB // 2))
    with pytest.raises(UnsupportedModelError, match="vocab_size_per_layer_input"):
        export_causal_lm(model, tmp_path / "refused", max_length=32, eos_token_id=1, pad_token_id=0)
    assert not (tmp_path / "refused").exists()

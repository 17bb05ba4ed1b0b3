"""Configs that change the tokens (issue #41, outcome 2): sliding windows shorter than prompt +
generation, Gemma 2 / 3 / 3n / 4 attention and final logit soft caps, Llama 3.1's frequency-adjusted
RoPE, Gemma 3 / 3n / 4 RoPE scaling factors, an untied LM head, partial rotary (GPT-NeoX, GPT-J,
Gemma 4's global layers).

Each feature is shown to matter in the export: the model is exported again with that one feature
turned off in the export only (its attribute patched on the model's own layers or config while
``export_causal_lm`` runs, restored after), and that folder must generate other tokens than the
library. So a test whose model has the feature exported exactly (here, or the family test named)
would fail if the export dropped it. A final soft cap is monotonic, so it can never change greedy
tokens: it is checked on the prefill logits instead (exact with it, off by far more without).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from jax2onnx_llm import export_causal_lm
from jax2onnx_llm.genai_run import greedy, prefill_logits, until_eos
from llm_test_helpers import NEW_TOKENS, PROMPTS, assert_same_tokens, check_folder

os.environ.setdefault("KERAS_BACKEND", "jax")


def _export(model, folder, eos, pad):
    # the growing cache: prefill_logits runs the graph with an empty past
    folder = export_causal_lm(model, folder, max_length=64, cache="concat", eos_token_id=eos, pad_token_id=pad)
    check_folder(folder)
    return folder


def _unused_token(token_lists, vocab: int) -> int:
    """An end token the library never generates for these prompts, so every new token is compared."""
    seen = {int(t) for tokens in token_lists for t in np.asarray(tokens).ravel()}
    return next(t for t in range(1, vocab) if t not in seen)


def assert_each_ablation_changes_the_tokens(tmp_path, model, expected, eos, pad, ablations) -> None:
    """``ablations``: ``name -> patch(monkeypatch, model)`` turning one feature off. Each export made
    under its patch generates other tokens than ``expected`` (the library's, for all of PROMPTS)."""
    for name, patch in ablations.items():
        with pytest.MonkeyPatch.context() as m:
            patch(m, model)
            folder = _export(model, tmp_path / f"without_{name}", eos, pad)
        got = [until_eos(row, eos) for row in greedy(folder, PROMPTS, NEW_TOKENS, pad_token_id=pad)]
        assert got != [until_eos(row, eos) for row in expected], (
            f"without {name} the export generates the library's tokens too: this model does not test {name}")


def _on_layers(layers, attribute: str, value):
    def patch(m, model):
        for layer in layers(model):
            assert hasattr(layer, attribute), (type(layer).__name__, attribute)  # else the patch tests nothing
            m.setattr(layer, attribute, value)

    return patch


# --- KerasHub -----------------------------------------------------------------------------------


def _keras():
    from llm_test_helpers import keras_hub_under_jax

    return keras_hub_under_jax()


def _gemma_attention(model):
    return [block.attention for block in model.backbone.transformer_layers]


def _keras_logits(model, ids):
    inputs = {"token_ids": ids, "padding_mask": np.ones_like(ids, bool)}
    if "position_ids" in getattr(model, "input", {}):  # Gemma 4's forward pass takes its positions
        inputs["position_ids"] = np.broadcast_to(np.arange(ids.shape[1], dtype=np.int32), ids.shape)
    # Keras' own compiled forward pass (one XLA program); calling the model eagerly compiled each of
    # its few hundred ops alone (Gemma 4: 17 s of CPU against 6 s; the logits agree to 2e-6)
    return np.asarray(model.predict_on_batch(inputs))


def _gemma_case(tmp_path, model, ablations, *, cap_at=None, exact: bool = True, family: str | None = None):
    """The export with every feature: KerasHub's tokens (alone and in a padded batch; ``exact=False``
    where a family test checks them) and prefill logits; without the final soft cap (``cap_at``: the
    object and attribute holding it, default the backbone's token embedding's ``logit_soft_cap``),
    other logits; without each of ``ablations``, other tokens. ``family``: the model is
    test_keras_hub_gemma's, whose export (the same options) is made once for both modules."""
    from test_keras_hub_families import keras_reference

    reference = keras_reference(model)
    expected = reference(PROMPTS)
    eos = _unused_token([expected, reference(PROMPTS[:1])], 128)
    if family is None:
        folder = _export(model, tmp_path / "all", eos, 0)
    else:
        from test_keras_hub_gemma import exported_once

        folder = exported_once(family, model, eos)
        check_folder(folder)
    if exact:
        assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)
    ids = np.asarray([PROMPTS[0]], np.int32)
    want = _keras_logits(model, ids)
    holder, attribute = cap_at or (model.backbone.token_embedding, "logit_soft_cap")
    cap = getattr(holder, attribute)
    assert np.abs(want).max() > 0.9 * cap, "the final soft cap binds no logit: raise the weights or lower the cap"
    np.testing.assert_allclose(prefill_logits(folder, ids), want, atol=2e-4)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(holder, attribute, None)
        uncapped = _export(model, tmp_path / "without_final_cap", eos, 0)
    assert np.abs(prefill_logits(uncapped, ids) - want).max() > 0.5 * cap  # off by half the cap or more
    assert_each_ablation_changes_the_tokens(tmp_path, model, expected, eos, 0, ablations)


def _scaled_keras(model, factor: float):
    """Larger blocks so greedy sequences vary (test_keras_hub_families' recipe)."""
    for v in model.backbone.weights:
        if "kernel" in v.path:
            v.assign(v.numpy() * factor)
    model.compile(sampler="greedy")
    return model


GEMMA_SIZES = dict(vocabulary_size=128, num_layers=2, num_query_heads=4, num_key_value_heads=2, hidden_dim=32,
                   intermediate_dim=64, head_dim=8)


def test_keras_gemma2_soft_caps_and_sliding_window(tmp_path):
    """Gemma 2 (KerasHub's ``GemmaBackbone``): attention soft cap 5, final soft cap 1, a window of 4
    tokens on the first layer (prompts of 3-7 tokens and 32 generated run past it)."""
    keras, keras_hub = _keras()
    keras.utils.set_random_seed(0)
    model = keras_hub.models.GemmaCausalLM(preprocessor=None, backbone=keras_hub.models.GemmaBackbone(
        **GEMMA_SIZES, attention_logit_soft_cap=5.0, final_logit_soft_cap=1.0, use_sliding_window_attention=True,
        sliding_window_size=4))
    _gemma_case(tmp_path, _scaled_keras(model, 3.0), {
        "the attention soft cap": _on_layers(_gemma_attention, "logit_soft_cap", None),
        "the sliding window": _on_layers(_gemma_attention, "use_sliding_window_attention", False),
    })


def test_keras_gemma3_rope_scaling_soft_caps_and_sliding_window(tmp_path):
    """Gemma 3 (text; six layers: KerasHub makes every sixth global): the global layer's RoPE scaled by
    8, attention soft cap 5, final soft cap 1, a window of 4 tokens on the five sliding layers."""
    keras, keras_hub = _keras()
    keras.utils.set_random_seed(0)
    model = keras_hub.models.Gemma3CausalLM(preprocessor=None, backbone=keras_hub.models.Gemma3Backbone(
        **{**GEMMA_SIZES, "num_layers": 6}, image_size=16, use_sliding_window_attention=True, sliding_window_size=4,
        attention_logit_soft_cap=5.0, final_logit_soft_cap=1.0, global_rope_scaling_factor=8.0))
    def rope_layers(model):  # the global layer's (the sliding ones' factor is 1)
        return [a.rope_layer for a in _gemma_attention(model) if a.rope_scaling_factor != 1.0]

    assert len(rope_layers(model)) == 1
    _gemma_case(tmp_path, _scaled_keras(model, 3.0), {
        "the RoPE scaling factor": _on_layers(rope_layers, "scaling_factor", 1.0),
        "the attention soft cap": _on_layers(_gemma_attention, "logit_soft_cap", None),
        "the sliding window": _on_layers(_gemma_attention, "use_sliding_window_attention", False),
    })


def test_keras_gemma4_soft_caps_windows_and_rope_settings(tmp_path):
    """Gemma 4 (text; test_keras_hub_gemma's model, whose tokens that test checks at both caches and
    targets): attention soft cap 5, final soft cap 1, a window of 4 tokens on the sliding layers, their
    RoPE scaled by 2, and the global layers rotating half of each head."""
    from test_keras_hub_gemma import decoder_blocks, make

    model = make("gemma4")
    sliding = [b for b in decoder_blocks(model) if b.use_sliding_window_attention]
    full = [b for b in decoder_blocks(model) if b.is_global_attention]
    assert sliding and full

    def no_window(m, model):
        for block in sliding:  # the block windows the mask; its attention layer's flag goes with it
            _on_layers(lambda _: [block, block.attention], "use_sliding_window_attention", False)(m, model)

    def whole_head(m, model):
        for block in full:
            assert block.attention.rotary_dim < block.attention.head_dim
            m.setattr(block.attention, "rotary_dim", block.attention.head_dim)

    _gemma_case(tmp_path, model, {
        "the attention soft cap": _on_layers(_gemma_attention, "logit_soft_cap", None),
        "the sliding window": no_window,
        "the sliding layers' RoPE scaling factor": _on_layers(
            lambda model: [b.attention.rope_layer for b in sliding], "scaling_factor", 1.0),
        "the global layers' partial rotary": whole_head,
    }, exact=False, family="gemma4")


def test_keras_gemma3n_final_soft_cap_window_and_rope_scaling(tmp_path):
    """Gemma 3n (text; test_keras_hub_gemma's model, whose tokens that test checks): final soft cap 0.25,
    a window of 4 tokens on the sliding layers, RoPE scaled by 2 (Gemma 3n has no attention soft cap)."""
    from test_keras_hub_gemma import decoder_blocks, make

    model = make("gemma3n")
    text = model.backbone.language_model

    def attention(model):
        return [b.attention for b in decoder_blocks(model)]

    _gemma_case(tmp_path, model, {
        "the sliding window": _on_layers(
            lambda model: [a for a in attention(model) if a.sliding_window is not None], "sliding_window", None),
        "the RoPE scaling factor": _on_layers(
            lambda model: [a.rotary_embedding for a in attention(model)], "scaling_factor", 1.0),
    }, cap_at=(text, "final_logit_soft_cap"), exact=False, family="gemma3n")


def _keras_family_case(tmp_path, family: str, ablations) -> None:
    """A family of test_keras_hub_families (whose tests export it exactly, both targets and caches):
    without each of ``ablations`` the export generates other tokens."""
    from test_keras_hub_families import keras_reference, make

    model = make(family)
    reference = keras_reference(model)
    expected = reference(PROMPTS)
    eos = _unused_token([expected, reference(PROMPTS[:1])], 128)
    assert_each_ablation_changes_the_tokens(tmp_path, model, expected, eos, 0, ablations)


def _llama_rotary(model):
    return [layer._self_attention_layer.rotary_embedding_layer for layer in model.backbone.transformer_layers]


def _plain_rope(m, model):
    """Llama 3.1's frequency adjustment off: the rotary layer's factors all unset (plain RoPE)."""
    for attribute in ("frequency_adjustment_factor", "low_freq_factor", "high_freq_factor",
                      "pretraining_sequence_length"):
        _on_layers(_llama_rotary, attribute, None)(m, model)


def test_keras_llama3_frequency_adjusted_rope_and_untied_head(tmp_path):
    """Llama 3 (``test_keras_hub_families``' "llama3": frequency adjustment 8 over a pretraining length
    of 16, and its own LM head, untied from the embedding)."""
    _keras_family_case(tmp_path, "llama3", {
        "the frequency-adjusted RoPE": _plain_rope,
        "the untied LM head": _on_layers(lambda model: [model.backbone.token_embedding], "tie_weights", True),
    })


def test_keras_gpt_neox_partial_rotary_changes_the_tokens(tmp_path):
    """GPT-NeoX rotates a quarter of each head (``rotary_percentage=0.25``): rotated whole, other tokens."""
    def whole_head(m, model):
        for layer in model.backbone.transformer_layers:
            attention = layer._self_attention_layer
            assert attention.rotary_dim < attention.attn_head_size
            m.setattr(attention, "rotary_dim", attention.attn_head_size)

    _keras_family_case(tmp_path, "gpt_neox", {"the partial rotary": whole_head})


# --- Hugging Face Flax --------------------------------------------------------------------------


def _hf_case(tmp_path, model, ablations, *, exact: bool = False) -> None:
    """A Hugging Face model: without each of ``ablations`` (patching its config, which the library's
    modules read on every call) the export generates other tokens. ``exact``: the export with every
    feature is checked here too (else a family test exports this config exactly)."""
    from test_transformers_flax import PAD, hf_reference_with_unused_eos

    # transformers' tokens with an end token they never reach (its EOS ends no row early: padded with PAD)
    reference, eos = hf_reference_with_unused_eos(model, [PROMPTS])
    if exact:
        assert_same_tokens(_export(model, tmp_path / "all", eos, PAD), reference, pad_token_id=PAD, eos=eos)
    assert_each_ablation_changes_the_tokens(tmp_path, model, reference(PROMPTS), eos, PAD, ablations)


def _config(attribute: str, value):
    def patch(m, model):
        assert hasattr(model.config, attribute), attribute
        m.setattr(model.config, attribute, value)

    return patch


def test_hf_partial_rotary_windows_and_untied_head_change_the_tokens(tmp_path):
    """GPT-J's partial rotary (4 of 8 dims; exact in test_hf_flax_more), GPT-Neo's local window of 5
    (test_hf_flax_more), Mistral's window of 6 (test_fallbacks_llm), and GPT-2 with its own LM head,
    untied (exact here; transformers' Flax Llama and Mistral always have their own): each dropped,
    other tokens."""
    pytest.importorskip("transformers", reason="transformers (4.x, with its Flax classes) provides the models")
    pytest.importorskip("flax", reason="transformers' Flax models need flax")
    import test_hf_flax_more as more
    import test_transformers_flax as hf

    _hf_case(tmp_path / "gptj", more.make("gptj"), {"the partial rotary": _config("rotary_dim", 8)})
    _hf_case(tmp_path / "gptneo", more.make("gptneo"), {"the local window": _config("window_size", 256)})
    _hf_case(tmp_path / "mistral", hf.make("mistral", sliding_window=6),
             {"the sliding window": _config("sliding_window", 256)})
    _hf_case(tmp_path / "gpt2", hf.make("gpt2", tie_word_embeddings=False),
             {"the untied LM head": _config("tie_word_embeddings", True)}, exact=True)

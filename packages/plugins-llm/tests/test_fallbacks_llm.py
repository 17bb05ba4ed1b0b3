"""The attention fusion's edges: configurations the fused lowering does not cover run the library's own
attention code and still generate exactly (no fused op written where it falls back; a KerasHub layer
the whole-layer region declines still fuses its softmax core, its rotation the library's), and the ones it
covers beyond the main tests' shapes (GroupQueryAttention's own rotation on Mistral and Gemma, a
RoPE scaling the library ignores) are fused and exact. Same harness as the family tests:
onnxruntime-genai's greedy tokens == the library's own greedy ``generate`` over NEW_TOKENS new tokens,
batch 1 and a left-padded batch of three, the sequences varying."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from jax2onnx_llm import export_causal_lm
from llm_test_helpers import (
    ATTENTION_OP,
    GQA_OP,
    MS,
    PROMPTS,
    assert_fused_attention,
    assert_layer_fusions,
    assert_same_tokens,
    check_folder,
    op_counts,
)

os.environ.setdefault("KERAS_BACKEND", "jax")


def assert_fused_layers(folder, target: str, fused: int) -> None:
    """Exactly ``fused`` layers got the LLM pack's fused attention of ``target``.

    A layer that falls back runs the library's attention, which core's graph rewrites may still
    turn into a plain opset-23 ``Attention`` / ``RotaryEmbedding`` (no cache inputs, one output);
    the pack's own forms are told apart by what only they write: GroupQueryAttention and
    com.microsoft ``RotaryEmbedding`` (``target="onnxruntime"``), an ``Attention`` reading the past keys/values
    through ``past_key``/``past_value`` into ``present`` (``target="onnx"``, the growing cache) or
    over the shared buffer its ScatterElements wrote (the shared cache)."""
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    ops = op_counts(folder)
    if target == "onnxruntime":
        assert ops.get((MS, "GroupQueryAttention"), 0) == fused, ops
        if fused == 0:  # (the RMS norms' com.microsoft fusion is not attention: it stays)
            assert ops.get((MS, "RotaryEmbedding"), 0) == 0, ops
    else:
        assert not any(domain == MS for domain, _ in ops), ops
        scattered = {o for n in graph.node if n.op_type == "ScatterElements" for o in n.output}
        pack_forms = [n for n in graph.node if n.op_type == "Attention"
                      and (len(n.output) > 1 or n.input[1] in scattered)]
        assert len(pack_forms) == fused, [(n.name, list(n.input)) for n in pack_forms]


# --- Hugging Face Flax -------------------------------------------------------------------------

def _hf_export_and_compare(tmp_path, model, cache: str, target: str):
    """Export with an end token these prompts never generate (so all NEW_TOKENS are compared),
    then genai's tokens == ``generate``'s."""
    reference, eos = _hf().hf_reference_with_unused_eos(model, (PROMPTS, PROMPTS[:1]), candidates=range(127, 0, -1))
    folder = export_causal_lm(model, tmp_path / "m", max_length=64, cache=cache, target=target, eos_token_id=eos)
    check_folder(folder)
    return folder, reference, eos


def _hf():
    pytest.importorskip("transformers", reason="transformers (4.x, with its Flax classes) provides the models")
    pytest.importorskip("flax", reason="transformers' Flax models need flax")
    import test_transformers_flax as hf

    return hf


def _hf_model(family: str, **overrides):
    return _hf().make(family, **overrides)


TARGETS_CACHES = [("onnxruntime", "concat"), ("onnxruntime", "shared"), ("onnx", "concat"), ("onnx", "shared")]


@pytest.mark.parametrize(("target", "cache"), TARGETS_CACHES)
@pytest.mark.parametrize("window", [6, None])
def test_hf_mistral_sliding_window_falls_back(tmp_path, window, target, cache):
    """A window of 6 positions, shorter than every prompt + 32 new tokens: the library's own
    (windowed) attention is exported, no fused op. ``sliding_window=None`` (the configs of
    Mistral v0.2 on) is, in transformers' Flax Mistral, a window of 0: its causal mask is
    ``triu(causal, -(sliding_window or 0))``, each token sees itself alone. A fused causal attention
    would generate other tokens than the library does, so that falls back too."""
    hf = _hf()
    model = _hf_model("mistral", sliding_window=window)
    folder, reference, eos = _hf_export_and_compare(tmp_path, model, cache, target)
    assert_fused_layers(folder, target, 0)
    assert_same_tokens(folder, reference, pad_token_id=hf.PAD, eos=eos)


@pytest.mark.parametrize("cache", ["concat", "shared"])
@pytest.mark.parametrize("family", ["mistral", "gemma"])
def test_hf_group_query_attention_rotates_itself(tmp_path, family, cache):
    """Head size 16 on Mistral and Gemma: GroupQueryAttention rotates q and k itself (do_rotary)."""
    hf = _hf()
    sizes = {"head_dim": 16} if family == "gemma" else {"hidden_size": 64, "intermediate_size": 128}
    model = _hf_model(family, **sizes)
    folder, reference, eos = _hf_export_and_compare(tmp_path, model, cache, "onnxruntime")
    assert_fused_attention(folder, "onnxruntime", 2, rotary="gqa")
    assert_same_tokens(folder, reference, pad_token_id=hf.PAD, eos=eos)


@pytest.mark.parametrize("target", ["onnxruntime", "onnx"])
def test_hf_llama_rope_scaling(tmp_path, target):
    """``rope_scaling`` in a Llama config: transformers' Flax Llama builds its rotary table without
    it (the scaling lives in the PyTorch code only), and the fusion reads the layer's own table, so
    the fused export matches what the Flax library generates."""
    hf = _hf()
    model = _hf_model("llama", rope_scaling={"rope_type": "linear", "factor": 4.0})
    folder, reference, eos = _hf_export_and_compare(tmp_path, model, "shared", target)
    assert_fused_attention(folder, target, 2, rotary="op", cache="shared")
    assert_same_tokens(folder, reference, pad_token_id=hf.PAD, eos=eos)


# --- KerasHub ----------------------------------------------------------------------------------

def _keras():
    keras = pytest.importorskip("keras", reason="KerasHub models need keras")
    keras_hub = pytest.importorskip("keras_hub", reason="keras-hub provides the models")
    if keras.backend.backend() != "jax":  # pragma: no cover
        pytest.skip("KerasHub models export under the JAX backend only (KERAS_BACKEND=jax)")
    import test_keras_hub as kh

    return keras, keras_hub, kh


def _keras_model(family: str, **options):
    keras, keras_hub, _ = _keras()
    keras.utils.set_random_seed(0)
    if family == "gemma":
        sizes = dict(vocabulary_size=128, num_layers=2, num_query_heads=4, num_key_value_heads=2, hidden_dim=32,
                     intermediate_dim=64, head_dim=8)
        backbone = keras_hub.models.GemmaBackbone(**{**sizes, **options})
        model = keras_hub.models.GemmaCausalLM(backbone=backbone, preprocessor=None)
        factor = 3.0
    else:
        backbone = keras_hub.models.LlamaBackbone(vocabulary_size=128, num_layers=2, num_query_heads=4,
                                                  num_key_value_heads=2, hidden_dim=32, intermediate_dim=64, **options)
        model = keras_hub.models.LlamaCausalLM(backbone=backbone, preprocessor=None)
        factor = 6.0
    for v in backbone.weights:  # as test_keras_hub: larger blocks so greedy sequences vary
        if "kernel" in v.path:
            v.assign(v.numpy() * factor)
    model.compile(sampler="greedy")
    return model


def _keras_export_and_compare(tmp_path, model, cache: str, target: str):
    _, _, kh = _keras()
    reference = kh.keras_reference(model)
    seen = set(np.asarray(reference(PROMPTS)).ravel()) | set(np.asarray(reference(PROMPTS[:1])).ravel())
    eos = next(t for t in range(1, 128) if t not in seen)
    folder = export_causal_lm(model, tmp_path / "m", max_length=64, cache=cache, target=target, eos_token_id=eos,
                              pad_token_id=0)
    check_folder(folder)
    return folder, reference, eos


def assert_core_fused(folder, target: str, whole_layers: int, layers: int = 2) -> None:
    """Every layer's attention fused (the export's per-layer report and one tagged node each):
    ``whole_layers`` of them as the whole-layer region (with the pack's rotary op), the others as
    the softmax core only (``frontends/keras_hub/core_attention.py``), KerasHub's own rotation beside it."""
    assert_layer_fusions(folder, [GQA_OP if target == "onnxruntime" else ATTENTION_OP] * layers)
    rotary = (MS, "RotaryEmbedding") if target == "onnxruntime" else ("", "RotaryEmbedding")
    assert op_counts(folder).get(rotary, 0) == 2 * whole_layers, op_counts(folder)
    assert_fused_layers(folder, target, whole_layers if target == "onnx" else layers)


@pytest.mark.parametrize(("target", "cache"), TARGETS_CACHES)
def test_keras_gemma_logit_soft_cap_falls_back(tmp_path, target, cache):
    """Gemma 2's attention logit soft cap (tanh on the scores): the whole-layer region declines,
    each layer's softmax core fuses with the op's soft cap (and the final logits' soft cap, Gemma
    2's other one, is the backbone's own code in any case)."""
    model = _keras_model("gemma", attention_logit_soft_cap=5.0, final_logit_soft_cap=30.0)
    folder, reference, eos = _keras_export_and_compare(tmp_path, model, cache, target)
    assert_core_fused(folder, target, whole_layers=0)
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)


@pytest.mark.parametrize(("target", "cache"), TARGETS_CACHES)
def test_keras_gemma_sliding_window_falls_back(tmp_path, target, cache):
    """Gemma 2's sliding window (on every other layer, KerasHub's choice): the global layer is
    fused whole, the windowed one's softmax core with KerasHub's windowed mask."""
    model = _keras_model("gemma", use_sliding_window_attention=True, sliding_window_size=6)
    folder, reference, eos = _keras_export_and_compare(tmp_path, model, cache, target)
    assert_core_fused(folder, target, whole_layers=1)
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)


SCALED_ROPE = {
    # Llama 3.1's frequency adjustment (the tiny head's two slow frequencies divided by 8): it
    # changes the tokens KerasHub generates, so a fused plain RoPE would be caught.
    "llama3": dict(rope_frequency_adjustment_factor=8.0, rope_low_freq_factor=1.0, rope_high_freq_factor=4.0,
                   rope_pretraining_sequence_length=32),
    # A position scaling factor: keras-hub 0.32's LlamaRotaryEmbedding does not apply it (its own
    # inverse frequencies leave it out; the tokens are those of factor 1), but a layer carrying it
    # still falls back, so a keras-hub that applies it stays exact.
    "position": dict(rope_position_scaling_factor=4.0),
}


@pytest.mark.parametrize(("target", "cache"), TARGETS_CACHES)
@pytest.mark.parametrize("rope", sorted(SCALED_ROPE))
def test_keras_llama_scaled_rope_falls_back(tmp_path, rope, target, cache):
    """A scaled RoPE: KerasHub's own rotation runs, its softmax core fused."""
    model = _keras_model("llama", **SCALED_ROPE[rope])
    folder, reference, eos = _keras_export_and_compare(tmp_path, model, cache, target)
    assert_core_fused(folder, target, whole_layers=0)
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)


@pytest.mark.parametrize("cache", ["concat", "shared"])
def test_keras_gemma_group_query_attention_rotates_itself(tmp_path, cache):
    """Head size 16 on KerasHub Gemma: GroupQueryAttention rotates q and k itself (do_rotary)."""
    model = _keras_model("gemma", head_dim=16)
    folder, reference, eos = _keras_export_and_compare(tmp_path, model, cache, "onnxruntime")
    assert_fused_attention(folder, "onnxruntime", 2, rotary="gqa")
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)

"""Every decoder-only KerasHub CausalLM through KerasHub's cached-call protocol
(``frontends/keras_hub/generic.py``): tiny random backbones built here (nothing downloaded),
exported and generated in onnxruntime-genai, whose greedy tokens must equal KerasHub's own greedy
``generate`` for one prompt and a left-padded batch of three."""

from __future__ import annotations

import numpy as np
import pytest
from jax2onnx_llm import export_causal_lm
from jax2onnx_llm.errors import UnsupportedModelError
from llm_test_helpers import (
    ATTENTION_OP,
    GQA_OP,
    MOE_FAMILIES,
    MS,
    NEW_TOKENS,
    PROMPTS,
    assert_layer_fusions,
    assert_moe_fused,
    assert_same_tokens,
    built_once,
    check_folder,
    keras_fingerprint,
    keras_hub_under_jax,
    op_counts,
    remembered,
)

keras, keras_hub = keras_hub_under_jax()

M = keras_hub.models
VOCAB = 128
# Attention-only sizes shared by the families (4 query heads over 2 KV heads, head size 8).
GQA = dict(vocabulary_size=VOCAB, num_layers=2, num_query_heads=4, num_key_value_heads=2, hidden_dim=32,
           intermediate_dim=64)
HALF = 4  # head_size // 2: the rotary factor lists' length


def _builders():
    return {
        # the frequency adjustment with a short pretraining length, so it changes every band
        "llama3": lambda: M.Llama3CausalLM(M.Llama3Backbone(
            **GQA, rope_frequency_adjustment_factor=8.0, rope_low_freq_factor=1.0, rope_high_freq_factor=4.0,
            rope_pretraining_sequence_length=16)),
        # a window of 6 tokens: prompts and generation run far past it
        "mistral": lambda: M.MistralCausalLM(M.MistralBackbone(**GQA, sliding_window=6)),
        "qwen": lambda: M.QwenCausalLM(M.QwenBackbone(**GQA)),
        "qwen3": lambda: M.Qwen3CausalLM(M.Qwen3Backbone(**GQA, head_dim=8)),
        # long-rope ("su") scaling factors, the short ones in force below the pretraining length
        "phi3": lambda: M.Phi3CausalLM(M.Phi3Backbone(
            **GQA, max_sequence_length=256, pretraining_sequence_length=128, rope_scaling_type="su",
            rope_scaling_short_factor=[1.0, 1.5, 2.0, 3.0], rope_scaling_long_factor=[2.0, 3.0, 4.0, 8.0])),
        # text only (no vision encoder); sliding-window layers with a window of 6, and an attention
        # logit soft cap low enough to change scores of this size
        "gemma3": lambda: M.Gemma3CausalLM(preprocessor=None, backbone=M.Gemma3Backbone(
            **GQA, head_dim=8, image_size=16, use_sliding_window_attention=True, sliding_window_size=6,
            attention_logit_soft_cap=5.0)),
        # SmolLM3's NoPE layers: rotary in the first layer only
        "smollm3": lambda: M.SmolLM3CausalLM(M.SmolLM3Backbone(
            vocabulary_size=VOCAB, hidden_dim=32, intermediate_dim=64, num_layers=2, num_attention_heads=4,
            num_key_value_heads=2, attention_bias=False, attention_dropout=0.0, rope_layer_enabled_list=[True, False],
            layer_types=["attention", "attention"], mlp_bias=False, layer_norm_epsilon=1e-6,
            max_position_embeddings=128, rope_theta=10000.0, partial_rotary_factor=1.0)),
        # Gemma 4 (text only): sliding-window layers alternating with global ones
        "gemma4": lambda: M.Gemma4CausalLM(preprocessor=None, backbone=M.Gemma4Backbone(
            **GQA, head_dim=8, image_size=16, sliding_window_size=6, sliding_window_pattern=2)),
        # Qwen 3.5 with full-attention layers only: its cache's convolution / recurrent state is carried unread
        "qwen3_5": lambda: M.Qwen3_5CausalLM(preprocessor=None, backbone=M.Qwen3_5Backbone(
            **GQA, head_dim=8, layer_types=["full_attention", "full_attention"])),
        "opt": lambda: M.OPTCausalLM(M.OPTBackbone(vocabulary_size=VOCAB, num_layers=2, num_heads=4, hidden_dim=32,
                                                  intermediate_dim=64, dropout=0.0, max_sequence_length=128)),
        "gpt_neox": lambda: M.GPTNeoXCausalLM(M.GPTNeoXBackbone(
            vocabulary_size=VOCAB, num_layers=2, num_heads=4, hidden_dim=32, intermediate_dim=64,
            max_sequence_length=128)),
        "bloom": lambda: M.BloomCausalLM(M.BloomBackbone(vocabulary_size=VOCAB, num_layers=2, num_heads=4,
                                                         hidden_dim=32, intermediate_dim=64)),
        "falcon": lambda: M.FalconCausalLM(M.FalconBackbone(vocabulary_size=VOCAB, num_layers=2,
                                                            num_attention_heads=4, hidden_dim=32,
                                                            intermediate_dim=64)),
        "mixtral": lambda: M.MixtralCausalLM(M.MixtralBackbone(**GQA, num_experts=4, top_k=2, sliding_window=6)),
        "qwen_moe": lambda: M.QwenMoeCausalLM(M.QwenMoeBackbone(
            **GQA, moe_intermediate_dim=16, shared_expert_intermediate_dim=32, num_experts=4, top_k=2)),
        "qwen3_moe": lambda: M.Qwen3MoeCausalLM(M.Qwen3MoeBackbone(
            **GQA, head_dim=8, moe_intermediate_dim=16, num_experts=4, top_k=2, norm_top_k_prob=True,
            tie_word_embeddings=True)),
        "gpt_oss": lambda: M.GptOssCausalLM(M.GptOssBackbone(**GQA, num_experts=4, top_k=2, sliding_window=6)),
        # Qwen 3.5 MoE with full-attention layers only: fused gate|up experts and a sigmoid-gated shared expert
        "qwen3_5_moe": lambda: M.Qwen3_5MoeCausalLM(preprocessor=None, backbone=M.Qwen3_5MoeBackbone(
            vocabulary_size=VOCAB, num_layers=2, num_query_heads=4, num_key_value_heads=2, head_dim=8, hidden_dim=32,
            moe_intermediate_dim=16, shared_expert_intermediate_size=32, num_experts=4, top_k=2,
            layer_types=["full_attention", "full_attention"])),
    }


#: What each family's attention layers become, per target (every layer alike in these models):
#: the fused op, or a piece of the reason the export's report gives for the library's own code.
#: (Bloom and Falcon: their ALiBi in the fused op's per-head bias, frontends/keras_hub/alibi_attention.py)
SINKS = "attention sinks: opset-23 Attention has no sink input"
FUSED = {family: {"onnxruntime": GQA_OP, "onnx": ATTENTION_OP} for family in _builders()}
FUSED.update({
    "gpt_oss": {"onnxruntime": GQA_OP, "onnx": SINKS},  # GroupQueryAttention's head_sink input
})


def make(family: str):
    keras.utils.set_random_seed(0)
    model = _builders()[family]()
    model.preprocessor = None
    # Small random blocks leave the embedding in charge (one token forever): scale the
    # kernels up so greedy sequences vary (more where q/k norms or tied embeddings damp them).
    scale = 8.0 if family.startswith("qwen") else 3.0
    scaled = ("kernel", "position_embedding", "experts/")  # Qwen 3 MoE's expert weights are no "kernel"
    for v in model.backbone.weights:
        if any(part in v.path for part in scaled):
            v.assign(v.numpy() * scale)
    model.compile(sampler="greedy")  # CausalLM's default sampler is top-k
    return model


def keras_reference(model):
    """KerasHub's own greedy generation: its ``generate_function`` (what ``generate`` runs per
    batch; Gemma 3's ``generate`` also returns image entries, absent here) on the prompts
    right-padded into a buffer the generated tokens fill."""
    generate = model.make_generate_function()

    def reference(prompts):
        length = max(len(p) for p in prompts) + NEW_TOKENS
        ids = np.zeros((len(prompts), length), np.int32)
        mask = np.zeros((len(prompts), length), bool)
        for row, p in enumerate(prompts):
            ids[row, : len(p)], mask[row, : len(p)] = p, True
        out = np.asarray(generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)["token_ids"])
        return np.stack([out[row, len(p) : len(p) + NEW_TOKENS] for row, p in enumerate(prompts)])

    # the tokens of each model (same classes, configs and weights) computed once a session
    return remembered(reference, "keras_reference", keras_fingerprint(model))


def exported_once(family: str, model, cache: str, eos: int):
    """``model`` (``make(family)``) exported for target="onnxruntime" with ``cache`` and end token
    ``eos``: once a session for this module and test_keras_hub_moe.py (its float32 Mixtral, end
    token 1, is this module's, whose unused end token is 1 too)."""
    def build(root):
        export_causal_lm(model, root / family, max_length=64, cache=cache, target="onnxruntime", eos_token_id=eos,
                         pad_token_id=0)

    return built_once(f"test_keras_hub_families-{family}-{cache}-{eos}", build)[0] / family


@pytest.mark.parametrize("cache", ["concat", "shared"])
@pytest.mark.parametrize("family", list(_builders()))
def test_generates_the_library_tokens(family, cache):
    """target="onnxruntime": GroupQueryAttention in every layer whose attention it expresses (the
    library's own code, for the reason the report names, in the others), KerasHub's tokens."""
    model = make(family)
    reference = keras_reference(model)
    seen = set(np.asarray(reference(PROMPTS)).ravel()) | set(np.asarray(reference(PROMPTS[:1])).ravel())
    eos = next(t for t in range(1, VOCAB) if t not in seen)
    folder = exported_once(family, model, cache, eos)
    check_folder(folder)
    if family in MOE_FAMILIES:  # target="onnxruntime": onnxruntime's MoE op per layer (keras_moe.py)
        assert_moe_fused(folder, layers=2)
    assert_layer_fusions(folder, [FUSED[family]["onnxruntime"]] * len(model.backbone.transformer_layers))
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)


@pytest.mark.parametrize("family", list(_builders()))
def test_standard_onnx_generates_the_library_tokens(tmp_path, family):
    """target="onnx": opset-23 Attention where it expresses the layer, standard ONNX only (no
    contrib op), same tokens; the model is left as it was."""
    model = make(family)
    reference = keras_reference(model)
    seen = set(np.asarray(reference(PROMPTS)).ravel()) | set(np.asarray(reference(PROMPTS[:1])).ravel())
    eos = next(t for t in range(1, VOCAB) if t not in seen)
    # the growing cache for some (Attention over the past plus the step's room; Bloom: its ALiBi over a
    # length that grows each step), the shared buffer for the rest
    cache = "concat" if family in ("mistral", "gemma3", "gpt_neox", "bloom") else "shared"
    folder = export_causal_lm(model, tmp_path / family, max_length=64, cache=cache, target="onnx",
                              eos_token_id=eos, pad_token_id=0)
    check_folder(folder)
    assert not any(domain == MS for domain, _ in op_counts(folder)), op_counts(folder)
    assert_layer_fusions(folder, [FUSED[family]["onnx"]] * len(model.backbone.transformer_layers))
    # the export's stand-ins (masks, positions, attention cores, the cache probe) are gone from the model
    touched = {"call", "call_with_cache", "_compute_attention_mask", "_compute_attention"}
    assert not [o for o in [model, *model.backbone._flatten_layers()] if touched & set(vars(o))]
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)


def test_phi3_long_rope_factors(tmp_path):
    """A prompt longer than the pretraining length (16): the long factors rotate every position,
    in KerasHub and in the export. (KerasHub's ``generate`` prefills its whole buffer, so with a
    shorter prompt its prompt keys take the long factors whenever the buffer passes the pretraining
    length, where a runtime prefilling the prompt takes the short ones: see the guide.)"""
    from jax2onnx_llm.genai_run import greedy, until_eos

    keras.utils.set_random_seed(0)
    model = M.Phi3CausalLM(M.Phi3Backbone(
        **GQA, max_sequence_length=256, pretraining_sequence_length=16, rope_scaling_type="su",
        rope_scaling_short_factor=[1.0, 1.5, 2.0, 3.0], rope_scaling_long_factor=[2.0, 3.0, 4.0, 8.0]))
    model.preprocessor = None
    for v in model.backbone.weights:
        if "kernel" in v.path:
            v.assign(v.numpy() * 2.0)  # (x3 cycles through only three tokens here)
    model.compile(sampler="greedy")
    prompt = [list(range(5, 25))]  # 20 tokens
    expected = keras_reference(model)(prompt)[0]
    eos = next(t for t in range(1, VOCAB) if t not in set(expected))
    folder = export_causal_lm(model, tmp_path / "phi3", max_length=64, eos_token_id=eos, pad_token_id=0)
    check_folder(folder)
    got = until_eos(greedy(folder, prompt, NEW_TOKENS, pad_token_id=0)[0], eos)
    assert got == list(expected) and len(set(got)) > 4, (got, expected)


def test_a_cache_beyond_keys_and_values_is_refused_in_one_line():
    """The generic protocol exports attention caches only: a cache with convolution and recurrent state
    (Qwen 3.5's linear-attention layers, which ``frontends/keras_hub/recurrent/`` exports instead:
    ``test_keras_hub_recurrent.py``) is refused by it in one line, naming the model class and its
    layer kinds."""
    from jax2onnx_llm.frontends.keras_hub.generic import decoder_spec as generic_decoder_spec

    keras.utils.set_random_seed(0)
    backbone = M.Qwen3_5Backbone(**GQA, head_dim=8, layer_types=["linear_attention", "full_attention"],
                                 linear_num_key_heads=2, linear_num_value_heads=2, linear_key_head_dim=8,
                                 linear_value_head_dim=8)
    model = M.Qwen3_5CausalLM(backbone=backbone, preprocessor=None)
    with pytest.raises(UnsupportedModelError, match=r"KerasHub Qwen3_5CausalLM is not supported: its decoder layers") as e:
        generic_decoder_spec(model, "Qwen3_5CausalLM")
    assert "\n" not in str(e.value) and "only attention layers export" in str(e.value)
    assert "linear_attention" in str(e.value)  # the layer kind that does not export


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_half_precision_model_exports_in_its_own_dtype(tmp_path, dtype):
    """A KerasHub model built (or loaded from a preset) in bfloat16 / float16: the cache and the logits
    are in the model's dtype (onnxruntime-genai wants one type for both; they were float32 logits
    beside a half-precision cache, which genai refused). bfloat16: KerasHub's own tokens, alone and
    in a left-padded batch. float16: KerasHub cannot generate on JAX's CPU backend (no float16
    dot_general), so the folder is checked to run and to keep to one dtype."""
    onnx = pytest.importorskip("onnx")
    from jax2onnx_llm.genai_run import greedy

    keras.utils.set_random_seed(0)
    model = M.Llama3CausalLM(M.Llama3Backbone(**GQA, dtype=dtype), preprocessor=None)
    for v in model.backbone.weights:
        if "kernel" in v.path:
            v.assign(v.numpy() * 3.0)
    model.compile(sampler="greedy")
    eos = VOCAB - 1
    folder = export_causal_lm(model, tmp_path / dtype, max_length=64, eos_token_id=eos, pad_token_id=0)
    check_folder(folder)
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    want = {"bfloat16": onnx.TensorProto.BFLOAT16, "float16": onnx.TensorProto.FLOAT16}[dtype]
    assert {o.name: o.type.tensor_type.elem_type for o in graph.output} == {o.name: want for o in graph.output}
    got = greedy(folder, PROMPTS, NEW_TOKENS)
    assert [greedy(folder, [p], NEW_TOKENS)[0] for p in PROMPTS] == got
    if dtype == "bfloat16":
        # KerasHub's greedy tokens, until bfloat16 rounding flips a near tie (KerasHub prefills its whole
        # buffer, genai the prompt: other sums in bfloat16; here after 17 tokens in one of the rows)
        want = np.asarray(keras_reference(model)(PROMPTS)).tolist()
        assert [row[:12] for row in got] == [row[:12] for row in want]
        assert len({t for row in want for t in row[:12]}) > 4, want

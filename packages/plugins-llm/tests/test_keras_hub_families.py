"""Every decoder-only KerasHub CausalLM through KerasHub's cached-call protocol
(``families/keras_hub_generic.py``): tiny random backbones built here (nothing downloaded),
exported and generated in onnxruntime-genai, whose greedy tokens must equal KerasHub's own greedy
``generate`` for one prompt and a left-padded batch of three."""

from __future__ import annotations

import os

import numpy as np
import pytest
from jax2onnx_llm import export_causal_lm
from jax2onnx_llm.errors import UnsupportedModelError
from llm_test_helpers import PROMPTS, assert_same_tokens, check_folder

os.environ.setdefault("KERAS_BACKEND", "jax")
keras = pytest.importorskip("keras", reason="KerasHub models need keras")
keras_hub = pytest.importorskip("keras_hub", reason="keras-hub provides the models")
if keras.backend.backend() != "jax":  # pragma: no cover
    pytest.skip("KerasHub models export under the JAX backend only (KERAS_BACKEND=jax)", allow_module_level=True)

from test_keras_hub import keras_reference  # noqa: E402

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
        # text only (no vision encoder); sliding-window layers with a window of 6
        "gemma3": lambda: M.Gemma3CausalLM(M.Gemma3Backbone(
            **GQA, head_dim=8, image_size=16, use_sliding_window_attention=True, sliding_window_size=6)),
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
            **GQA, head_dim=8, moe_intermediate_dim=16, num_experts=4, top_k=2, norm_top_k_prob=True)),
        "gpt_oss": lambda: M.GptOssCausalLM(M.GptOssBackbone(**GQA, num_experts=4, top_k=2, sliding_window=6)),
    }


def make(family: str):
    keras.utils.set_random_seed(0)
    model = _builders()[family]()
    model.preprocessor = None
    # Small random blocks leave the embedding in charge (one token forever): scale the
    # kernels up so greedy sequences vary.
    for v in model.backbone.weights:
        if "kernel" in v.path or "position_embedding" in v.path:
            v.assign(v.numpy() * 3.0)
    model.compile(sampler="greedy")  # CausalLM's default sampler is top-k
    return model


@pytest.mark.parametrize("family", list(_builders()))
def test_generates_the_library_tokens(tmp_path, family):
    model = make(family)
    reference = keras_reference(model)
    seen = set(np.asarray(reference(PROMPTS)).ravel()) | set(np.asarray(reference(PROMPTS[:1])).ravel())
    eos = next(t for t in range(1, VOCAB) if t not in seen)
    folder = export_causal_lm(model, tmp_path / family, max_length=64, eos_token_id=eos, pad_token_id=0)
    check_folder(folder)
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)

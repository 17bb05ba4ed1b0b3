"""Hugging Face Flax models for the bench: tiny random configs of ViT, BERT and GPT-2 (2 layers,
width 64, the shapes of the rewrite tests) and a BERT-base-sized encoder (12 layers, width 768,
12 heads, MLP 3072: 110 M parameters, random weights). Nothing is downloaded: each model is built
from its config with a fixed seed, so every process builds the same weights.

Needs transformers (4.57's Flax classes); bench/models.py adds these to MODELS when it is
importable, so the peer's environment, which may lack it, still loads the NNX models.
"""

from __future__ import annotations

import jax.numpy as jnp


def _vit():
    import transformers as T

    cfg = T.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                      image_size=32, patch_size=8)
    model = T.FlaxViTModel(cfg, seed=0)
    return lambda pixels: model(pixels, params=model.params).last_hidden_state


def _bert(layers=2, width=64, heads=4, mlp=128, vocab=100, positions=64):
    import transformers as T

    cfg = T.BertConfig(vocab_size=vocab, hidden_size=width, num_hidden_layers=layers, num_attention_heads=heads,
                       intermediate_size=mlp, max_position_embeddings=positions)
    model = T.FlaxBertModel(cfg, seed=0)

    def run(ids):  # every token attended (a mask of ones), as a plain encoder call
        return model(ids, attention_mask=jnp.ones_like(ids), params=model.params).last_hidden_state

    return run


def _gpt2():
    import transformers as T

    cfg = T.GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4, n_positions=64)
    model = T.FlaxGPT2Model(cfg, seed=0)
    return lambda ids: model(ids, params=model.params).last_hidden_state


def specs(ModelSpec):
    f32 = "float32"
    return [
        ModelSpec("hf_vit_2l", "HF FlaxViT, 2 layers, d=64, 4 heads, 32x32 image, 8x8 patches (random)",
                  _vit, (("B", 3, 32, 32),), (f32,)),
        ModelSpec("hf_bert_2l", "HF FlaxBert, 2 layers, d=64, 4 heads, 16 tokens (random)",
                  _bert, (("B", 16),), ("int32",), int_high=100),
        ModelSpec("hf_gpt2_2l", "HF FlaxGPT2, 2 layers, d=64, 4 heads, 16 tokens (random)",
                  _gpt2, (("B", 16),), ("int32",), int_high=100),
        ModelSpec("bert_base_encoder", "BERT-base-sized HF FlaxBert encoder: 12 layers, d=768, 12 heads, MLP 3072, "
                  "128 tokens (110 M params, random)",
                  lambda: _bert(12, 768, 12, 3072, 30522, 512), (("B", 128),), ("int32",), int_high=30522,
                  batch=1, big=True),
    ]

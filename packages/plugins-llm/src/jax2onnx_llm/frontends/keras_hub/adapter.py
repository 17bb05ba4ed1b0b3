"""KerasHub ``CausalLM`` models under the JAX backend: GPT-2, Gemma, Llama.

The step runs the model's own layers as its ``call_with_cache`` does: the backbone's embeddings,
each decoder layer with its per-layer cache ``(batch, 2, length, kv_heads, head_size)`` and
``cache_update_index``, the final norm and the tied reverse embedding. The adapter supplies what
``call_with_cache`` cannot express for a padded batch:

- the attention mask over the cache (padding and causality), through the decoders'
  ``decoder_attention_mask`` (GPT-2, Llama) or, for Gemma, whose block only takes a query padding
  mask, by standing in for the block's mask method during the call;
- per-row positions for GPT-2's learned position table (KerasHub numbers a row from its first
  token, which a left-padded row does not start with). RoPE models rotate by ``past + i`` for
  every row; rotary scores depend only on position differences, so the shared offset of a padded
  row changes nothing.

The cache moves in and out of KerasHub's form as for Hugging Face: the shared buffer is the cache
(``cache_update_index = past``); the concat layout gets room for the step's tokens after the past.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax.numpy as jnp

from ...errors import UnsupportedModelError
from ...spec import DecoderSpec, KVCache
from ..support import supported_family
from .gemma_family import FAMILIES as GEMMA_FAMILIES
from .generic import attention_cores, library_facts

FAMILIES = {"GPT2CausalLM": "decoder", "GemmaCausalLM": "gemma", "LlamaCausalLM": "llama"}


def decoder_spec(model: Any) -> DecoderSpec:
    import keras

    name = type(model).__name__
    if keras.backend.backend() != "jax":
        raise UnsupportedModelError(
            f"KerasHub {name} runs on the {keras.backend.backend()!r} backend; set KERAS_BACKEND=jax before importing keras"
        )
    if name in GEMMA_FAMILIES:  # Gemma 3n, Gemma 4: gemma_family/
        return GEMMA_FAMILIES[name](model, name)
    from .recurrent import claims as recurrent_claims
    from .recurrent import decoder_spec as recurrent_decoder_spec

    if recurrent_claims(model):  # layers with state beyond keys and values (recurrent/)
        return recurrent_decoder_spec(model, name)
    if name not in FAMILIES:  # every other CausalLM: KerasHub's cached-call protocol
        from .generic import decoder_spec as generic_decoder_spec

        return generic_decoder_spec(model, name)
    name, family = supported_family(model, FAMILIES, "KerasHub's")
    backbone = model.backbone
    layers = backbone.num_layers
    if name == "GPT2CausalLM":
        heads = kv_heads = backbone.num_heads
        head_size = backbone.hidden_dim // heads
        positions = backbone.max_sequence_length
    elif name == "GemmaCausalLM":
        heads, kv_heads, head_size = backbone.num_query_heads, backbone.num_key_value_heads, backbone.head_dim
        positions = None  # RoPE: no table to run out of
    else:
        heads, kv_heads = backbone.num_query_heads, backbone.num_key_value_heads
        head_size = backbone.hidden_dim // heads
        positions = None

    def step(params: Any, input_ids: Any, attention_mask: Any, position_ids: Any, cache: KVCache) -> Any:
        batch, seq = input_ids.shape
        past = jnp.asarray(cache.past_length(seq), jnp.int32)
        visible = cache.key_valid(seq)[:, 0]  # (batch, sequence, capacity)
        x = backbone.token_embedding(input_ids)
        if name == "GPT2CausalLM":
            table = backbone.position_embedding.position_embeddings
            x = backbone.embeddings_add((x, jnp.take(jnp.asarray(table), position_ids, axis=0).astype(x.dtype)))
        elif name == "GemmaCausalLM":
            x = x * jnp.sqrt(jnp.asarray(backbone.hidden_dim, x.dtype))
        # what the whole-layer regions (attention.py) decline: the softmax core fused
        with attention_cores(backbone.transformer_layers, past, cache.max_length):
            for i, layer in enumerate(backbone.transformer_layers):
                k, v = cache.keys[i].transpose(0, 2, 1, 3), cache.values[i].transpose(0, 2, 1, 3)
                if cache.layout == "concat":
                    room = jnp.zeros((batch, seq, kv_heads, head_size), k.dtype)
                    k, v = jnp.concatenate([k, room], axis=1), jnp.concatenate([v, room], axis=1)
                layer_cache = jnp.stack([k, v], axis=1)  # (batch, 2, capacity, kv_heads, head_size)
                if name == "GemmaCausalLM":
                    with _attention_mask(layer, visible):
                        x, layer_cache = layer(x, cache=layer_cache, cache_update_index=past)
                else:
                    x, layer_cache = layer(x, decoder_attention_mask=visible, self_attention_cache=layer_cache,
                                           self_attention_cache_update_index=past)
                cache.keys[i] = layer_cache[:, 0].transpose(0, 2, 1, 3)
                cache.values[i] = layer_cache[:, 1].transpose(0, 2, 1, 3)
        x = backbone.layer_norm(x)
        return backbone.token_embedding(x, reverse=True), cache

    return DecoderSpec(
        step=step, params=None, num_layers=layers, num_heads=heads, num_kv_heads=kv_heads, head_size=head_size,
        hidden_size=backbone.hidden_dim, vocab_size=backbone.vocabulary_size, max_positions=positions,
        model_type=family, family=f"KerasHub {name}", **library_facts(model),
    )



@contextlib.contextmanager
def _attention_mask(layer: Any, mask: Any) -> Iterator[None]:
    """Gemma's block builds its mask from a query padding mask and causality; for this call it
    gets the full (batch, sequence, capacity) mask instead (an instance attribute, removed after)."""
    layer._compute_attention_mask = lambda *args, **kwargs: mask
    try:
        yield
    finally:
        del layer._compute_attention_mask

"""KerasHub's ``Qwen3_5CausalLM`` / ``Qwen3_5MoeCausalLM`` with Gated DeltaNet layers, as a
:class:`~jax2onnx_llm.stateful.StatefulDecoderSpec`.

The step runs the model's own decoder layers, each through its ``call_and_update_cache`` as the
library's ``call_with_cache`` does: the full-attention layers with their KerasHub cache
``(batch, 2, capacity, kv_heads, head_size)`` and the padding mask (handed in as
``decoder_attention_mask`` for this call, as ``generic.py`` does), and the linear-attention layers
with their ``(conv, recurrent)`` state, whose Gated DeltaNet runs as ``gated_delta.py`` writes it (the
library's math, traceable for any number of new tokens, with the padding it cannot express).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import jax.numpy as jnp

from ....stateful import ATTENTION, STATE, StatefulDecoderSpec
from ..generic import (
    attention_cores,
    decoder_attention_mask_for,
    library_facts,
    override_attribute,
    row_rotaries,
    row_rotary,
)
from .gated_delta import gated_delta_net


def decoder_spec(model: Any, name: str) -> StatefulDecoderSpec:
    backbone = model.backbone
    decoders = list(backbone.transformer_layers)
    kinds = tuple(STATE if layer.layer_type == "linear_attention" else ATTENTION for layer in decoders)
    kv_heads, head_size = int(backbone.num_key_value_heads), int(backbone.head_dim)
    key_dim = backbone.linear_num_key_heads * backbone.linear_key_head_dim
    conv_dim = 2 * key_dim + backbone.linear_num_value_heads * backbone.linear_value_head_dim
    state_shape = ((conv_dim, backbone.linear_conv_kernel_dim - 1),
                   (backbone.linear_num_value_heads, backbone.linear_key_head_dim, backbone.linear_value_head_dim))
    rotaries = row_rotaries(backbone)

    def step(params: Any, input_ids: Any, attention_mask: Any, position_ids: Any, cache: Any, states: list[Any],
             pad: Any) -> Any:
        batch, seq = input_ids.shape
        past = jnp.asarray(cache.past_length(seq), jnp.int32)
        visible = cache.key_valid(seq)[:, 0]  # (batch, sequence, capacity): padding and causality
        x = backbone.token_embedding(input_ids)
        kv_at = state_at = 0
        with contextlib.ExitStack() as stack:
            stack.enter_context(attention_cores(decoders, past, cache.max_length))
            first_real = jnp.argmax(attention_mask > 0, axis=1).astype(jnp.int32)
            for rotary in rotaries:
                stack.enter_context(row_rotary(rotary, first_real))
            for layer, kind in zip(decoders, kinds):
                if kind == ATTENTION:
                    k = cache.keys[kv_at].transpose(0, 2, 1, 3)
                    v = cache.values[kv_at].transpose(0, 2, 1, 3)
                    room = jnp.zeros((batch, seq, kv_heads, head_size), k.dtype)
                    layer_cache = jnp.stack([jnp.concatenate([k, room], 1), jnp.concatenate([v, room], 1)], axis=1)
                    with decoder_attention_mask_for(layer, visible):
                        x, layer_cache, _, _ = layer.call_and_update_cache(
                            x, kv_cache=layer_cache, conv_cache=None, recurrent_cache=None, cache_update_index=past)
                    cache.keys[kv_at] = layer_cache[:, 0].transpose(0, 2, 1, 3)
                    cache.values[kv_at] = layer_cache[:, 1].transpose(0, 2, 1, 3)
                    kv_at += 1
                else:
                    conv, recurrent = states[state_at]
                    with _linear_attention(layer._linear_attn, pad):
                        x, _, conv, recurrent = layer.call_and_update_cache(
                            x, kv_cache=None, conv_cache=conv, recurrent_cache=recurrent, cache_update_index=past)
                    states[state_at] = (conv, recurrent)
                    state_at += 1
        x = backbone.layer_norm(x)
        return backbone.token_embedding(x, reverse=True), cache, states

    facts = library_facts(model)
    if facts["pad_token_id"] is None:
        facts["pad_token_id"] = 0
    return StatefulDecoderSpec(
        step=step, params=None, num_layers=len(decoders), num_heads=int(backbone.num_query_heads),
        num_kv_heads=kv_heads, head_size=head_size, hidden_size=int(backbone.hidden_dim),
        vocab_size=int(backbone.vocabulary_size), model_type="qwen3_5_text", family=f"KerasHub {name}",
        cache_layouts=("concat",), layer_kinds=kinds, state_shapes=tuple(state_shape for k in kinds if k == STATE),
        **facts,
    )


@contextlib.contextmanager
def _linear_attention(layer: Any, pad: Any) -> Iterator[None]:
    """For this call, the Gated DeltaNet layer's ``call`` as :func:`gated_delta_net` (its cache is
    the ``(conv, recurrent)`` pair; ``pad``: the tokens that change no state)."""

    def call(hidden_states: Any, attention_mask: Any = None, cache: Any = None, cache_update_index: Any = None,
             training: Any = None) -> Any:
        out, conv, recurrent = gated_delta_net(layer, hidden_states, cache[0], cache[1], pad)
        return out, (conv, recurrent)

    with override_attribute(layer, "call", call):
        yield

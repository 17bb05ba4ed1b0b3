"""KerasHub ``Gemma3nCausalLM`` (text): the step is the model's own ``call_with_cache`` (AltUp's
predict/correct streams, LAuReL, the per-layer inputs from ``embed_tokens_per_layer``, sliding and
global layers, KV sharing, the final soft cap: all the library's code). What the adapter adds is
what ``generic.py`` adds for the other families, in Gemma 3n's own forms:

- the cache: KerasHub's ``(batch, layers, 2, kv_heads, length, head_size)`` is the folder's
  per-layer ``(batch, kv_heads, length, head_size)`` stacked (heads first, as onnxruntime-genai
  lays it out: no transpose); KV-shared layers' slots, which no layer reads, stay out of the folder
  (``kv_sharing.py``);
- the mask: each decoder block's ``_compute_attention_mask`` (padding and causality; its padding
  mask covers only the step's tokens) returns the step's full ``(batch, sequence, capacity)`` mask
  instead; the attention layer narrows it by its sliding window itself;
- the softmax core: Gemma 3n's ``_compute_attention`` takes heads-first queries and un-repeated
  keys and returns ``(output, weights)``; it is handed to the shared core fusion
  (``core_attention.py``, which verifies it on a probe before fusing) through a sequence-first view
  of itself.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import jax.numpy as jnp

from ....attention_report import decline, register
from ....errors import UnsupportedModelError
from ....spec import DecoderSpec, KVCache
from ...support import only_holders
from ..core_attention import core_attention
from ..generic import library_facts, override_attribute, row_rotaries, row_rotary
from .kv_sharing import holders


def decoder_spec(model: Any, name: str) -> DecoderSpec:
    backbone = model.backbone
    text = getattr(backbone, "language_model", None)
    decoders = list(getattr(text, "transformer_layers", None) or [])
    if not decoders or not callable(getattr(model, "call_with_cache", None)):
        raise UnsupportedModelError(
            f"KerasHub {name} is not supported: its backbone has no language_model.transformer_layers or the model "
            "no call_with_cache (the Gemma 3n layout this adapter reads); wrap the decoder in a jax2onnx_llm.DecoderSpec"
        )
    kv_heads, head_size = int(text.num_key_value_heads), int(text.head_dim)
    rotaries = row_rotaries(backbone)
    num_layers = len(decoders)

    def step(params: Any, input_ids: Any, attention_mask: Any, position_ids: Any, cache: KVCache) -> Any:
        batch, seq = input_ids.shape
        past = jnp.asarray(cache.past_length(seq), jnp.int32)
        visible = cache.key_valid(seq)[:, 0]  # (batch, sequence, capacity): padding and causality
        per_layer = []
        for i in range(num_layers):
            k, v = cache.keys[i], cache.values[i]  # (batch, kv_heads, length, head_size)
            if cache.layout == "concat":
                room = jnp.zeros((batch, kv_heads, seq, head_size), k.dtype)
                k, v = jnp.concatenate([k, room], axis=2), jnp.concatenate([v, room], axis=2)
            per_layer.append(jnp.stack([k, v], axis=1))
        library_cache = jnp.stack(per_layer, axis=1)
        with contextlib.ExitStack() as stack:
            for layer in decoders:
                stack.enter_context(override_attribute(layer, "_compute_attention_mask", lambda *a, **k: visible))
            stack.enter_context(_heads_first_cores(decoders, past, cache.max_length))
            first_real = jnp.argmax(attention_mask > 0, axis=1).astype(jnp.int32)  # each row's left padding
            for rotary in rotaries:
                stack.enter_context(row_rotary(rotary, first_real))
            logits, _, library_cache = model.call_with_cache(input_ids, library_cache, past)
        for i in range(num_layers):
            cache.keys[i], cache.values[i] = library_cache[:, i, 0], library_cache[:, i, 1]
        return logits, cache

    facts = library_facts(model)
    if facts["pad_token_id"] is None:
        facts["pad_token_id"] = int(getattr(text, "pad_token_id", 0) or 0)
    spec = DecoderSpec(
        step=step, params=None, num_layers=num_layers, num_heads=int(text.num_attention_heads), num_kv_heads=kv_heads,
        head_size=head_size, hidden_size=int(text.hidden_size), vocab_size=int(text.vocab_size),
        model_type="decoder", family=f"KerasHub {name}", **facts,
    )
    return only_holders(spec, holders([layer.attention for layer in decoders]))


@contextlib.contextmanager
def _heads_first_cores(decoders: list[Any], past: Any, context: int | None) -> Iterator[None]:
    """For this call, each decoder block's attention core through the shared core fusion."""
    register(decoders)
    with contextlib.ExitStack() as stack:
        for i, decoder in enumerate(decoders):
            attention = getattr(decoder, "attention", None)
            if not callable(getattr(attention, "_compute_attention", None)):
                decline(i, "no separable attention core (_compute_attention) in the layer")
                continue
            stack.enter_context(override_attribute(attention, "_compute_attention", _fused_heads_first(
                attention, attention._compute_attention, past, context)))
        yield


def _fused_heads_first(layer: Any, original: Callable[..., Any], past: Any, context: int | None) -> Callable[..., Any]:
    """Gemma 3n's ``_compute_attention(query (b, heads, q, d), key (b, kv, T, d), value, mask)``,
    returning ``(output (b, q, heads, d), weights)``, seen sequence-first by ``core_attention``
    (queries ``(b, q, heads, d)``, keys ``(b, T, kv, d)``, one output)."""

    def sequence_first(query: Any, key: Any, value: Any, attention_mask: Any) -> Any:
        out, _ = original(query.transpose(0, 2, 1, 3), key.transpose(0, 2, 1, 3), value.transpose(0, 2, 1, 3),
                          attention_mask)
        return out

    fused = core_attention(layer, sequence_first, past, context)

    def heads_first(query: Any, key: Any, value: Any, attention_mask: Any, training: bool = False) -> Any:
        out = fused(query.transpose(0, 2, 1, 3), key.transpose(0, 2, 1, 3), value.transpose(0, 2, 1, 3),
                    attention_mask)
        return out, None  # the weights: KerasHub's call drops them

    return heads_first

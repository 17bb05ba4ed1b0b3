"""KV sharing (Gemma 3n, Gemma 4): a model's last layers attend to the keys and values an earlier
layer of their kind computed and compute none of their own. KerasHub still gives those layers a
slot in its stacked cache (zeros that no layer reads); the folder carries only the layers that hold
keys and values (``genai_config.json``'s ``num_hidden_layers`` counts them), so a shared layer costs
no cache memory in onnxruntime-genai."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp

from ....spec import DecoderSpec, KVCache


def holders(decoders: list[Any]) -> list[int]:
    """The indices of the decoder layers that compute their own keys and values."""
    return [i for i, layer in enumerate(decoders) if not getattr(layer, "is_kv_shared_layer", False)]


def only_holders(spec: DecoderSpec, holding: list[int]) -> DecoderSpec:
    """``spec`` (whose step reads and writes every decoder layer's cache) as a spec whose cache holds
    only the layers ``holding``: the others get zeros for the call (unread) and are dropped after."""
    if len(holding) == spec.num_layers:
        return spec
    step, total = spec.step, spec.num_layers

    def step_of_holders(params: Any, input_ids: Any, attention_mask: Any, position_ids: Any, cache: KVCache) -> Any:
        empty = jnp.zeros_like(cache.keys[0])
        slot = {layer: n for n, layer in enumerate(holding)}
        full = KVCache(tuple(cache.keys[slot[i]] if i in slot else empty for i in range(total)),
                       tuple(cache.values[slot[i]] if i in slot else empty for i in range(total)),
                       cache.attention_mask, cache.layout, cache.length, cache.max_length)
        logits, full = step(params, input_ids, attention_mask, position_ids, full)
        cache.keys = [full.keys[i] for i in holding]
        cache.values = [full.values[i] for i in holding]
        return logits, cache

    return dataclasses.replace(spec, step=step_of_holders, num_layers=len(holding))

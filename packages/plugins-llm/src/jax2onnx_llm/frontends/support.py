"""What the family adapters share: naming the supported classes of a library; a folder cache that
leaves out the layers that read another layer's keys and values (KV sharing)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp

from ..errors import UnsupportedModelError
from ..spec import DecoderSpec, KVCache


def supported_family(model: Any, families: dict[str, str], library: str) -> tuple[str, str]:
    """``model``'s class name and its family in ``families`` (class name -> family), or a clear error
    naming the classes ``library`` (as the message calls it) supports here."""
    name = type(model).__name__
    family = families.get(name)
    if family is None:
        raise UnsupportedModelError(
            f"{library} {name} is not a supported causal LM: use one of {sorted(families)}, or wrap the decoder in a "
            "jax2onnx_llm.DecoderSpec"
        )
    return name, family


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

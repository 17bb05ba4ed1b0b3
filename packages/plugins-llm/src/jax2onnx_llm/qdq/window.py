"""The static step an NPU runs: one window of ``W`` new tokens over a fixed-length cache.

Both graphs of a static LLM are this function, at two window sizes (the prefill ``W = P`` and the
decode ``W = 1``), in onnxruntime-genai's sliding-window layout for static models:

- ``input_ids``: ``(1, W)`` int32, the window's tokens (a prompt shorter than ``P`` is padded on
  the left with the pad id);
- ``attention_mask``: ``(1, L)`` int32 over the ``L = max_length`` slots of the slid cache
  (``past[W:]``, then the window), 1 on real tokens;
- ``past_key_values.i.key/value``: ``(1, kv_heads, L, head_size)``, the cache, newest at the end;
- ``logits``: ``(1, W, vocab)``; ``present.i.key/value``: ``(1, kv_heads, L, head_size)``, the cache
  slid by ``W``: its oldest ``W`` slots dropped, the window's new keys and values appended.

The graph slides its cache itself, so past and present have one static shape and a runtime binds
one buffer as both (onnxruntime-genai 0.18 does: a past whose sequence axis is a fixed number is
its shared past/present buffer). onnxruntime-genai's own sliding cache (``slide_key_value_cache``)
is not used: 0.18 builds it only where the device asks for it (its QNN models), and only over uint8
caches in a transposed key layout; on the CPU provider it feeds each graph's present back as the
next past, so a graph writing only the window's slots breaks at the first decode step.

The attention reads the slid cache (``L`` slots: ``past[W:]`` and the window), masked by
``attention_mask`` and causally inside the window; positions count the real tokens before each
(``cumsum(mask) - 1``), so left padding anywhere changes nothing. Every shape is static.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..spec import DecoderSpec, KVCache, position_ids_from_mask


def cache_shape(spec: DecoderSpec, slots: int) -> tuple[int, ...]:
    """A key's or value's cache shape over ``slots`` positions."""
    return (1, spec.num_kv_heads, slots, spec.head_size)


def window_step(spec: DecoderSpec) -> Any:
    """``(input_ids, attention_mask, *past) -> (logits, *present)`` with past/present interleaved per
    layer as ``key, value`` (the module doc)."""

    def run(input_ids: Any, attention_mask: Any, *past: Any) -> tuple[Any, ...]:
        window = input_ids.shape[1]
        mask = attention_mask.astype(jnp.int32)
        # the slots that stay after the slide; the step appends the window's keys and values to them
        kept = [t[:, :, window:] for t in past]
        kv = KVCache(kept[0::2], kept[1::2], mask, "concat")
        position_ids = position_ids_from_mask(mask, window)
        logits, kv = spec.step(spec.params, input_ids, mask, position_ids, kv)
        present = [t for pair in zip(kv.keys, kv.values) for t in pair]
        return (logits.astype(spec.dtype), *present)

    return run


def window_specs(spec: DecoderSpec, window: int, max_length: int) -> list[Any]:
    """The static input shapes of the ``window``-token graph."""
    ids = jax.ShapeDtypeStruct((1, window), jnp.int32)
    mask = jax.ShapeDtypeStruct((1, max_length), jnp.int32)
    kv = jax.ShapeDtypeStruct(cache_shape(spec, max_length), spec.dtype)
    return [ids, mask, *([kv] * (2 * spec.num_layers))]


__all__ = ["cache_shape", "window_specs", "window_step"]

"""The static step an NPU runs: one window of ``W`` new tokens over a fixed-length cache.

Both graphs of a static LLM are this function, at two window sizes (the prefill ``W = P`` and the
decode ``W = 1``), in onnxruntime-genai's sliding-window layout for static models:

- ``input_ids``: ``(1, W)`` int32, the window's tokens (a prompt shorter than ``P`` is padded on
  the left with the pad id);
- ``attention_mask``: ``(1, L)`` int32 over the ``L = max_length`` slots ``[past | window]``, 1 on
  real tokens;
- ``past_key_values.i.key/value``: ``(1, kv_heads, head_size, L - W)``, the cache so far, newest at
  the end (positions last: the shape onnxruntime-genai 0.18's windowed cache hands both, measured by
  running it);
- ``logits``: ``(1, W, vocab)``; ``present.i.key/value``: ``(1, kv_heads, head_size, W)``, the
  window's new keys and values only (the runtime slides them onto the end of the cache).

The attention reads ``past`` and the window concatenated (``L`` slots), masked by
``attention_mask`` and causally inside the window; positions count the real tokens before each
(``cumsum(mask) - 1``), so left padding anywhere changes nothing. Every shape is static.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..spec import DecoderSpec, KVCache, position_ids_from_mask

#: the cache axis that runs over positions (keys and values alike: (1, kv_heads, head_size, T))
CACHE_AXIS = 3


def cache_shape(spec: DecoderSpec, slots: int) -> tuple[int, ...]:
    """A key's or value's cache shape over ``slots`` positions."""
    return (1, spec.num_kv_heads, spec.head_size, slots)


def _to_step(t: Any) -> Any:  # the cache layout <-> the step's (1, kv_heads, T, head_size)
    return t.transpose(0, 1, 3, 2)


def window_step(spec: DecoderSpec) -> Any:
    """``(input_ids, attention_mask, *past) -> (logits, *present)`` with past/present interleaved per
    layer as ``key, value`` (the module doc)."""

    def run(input_ids: Any, attention_mask: Any, *past: Any) -> tuple[Any, ...]:
        window = input_ids.shape[1]
        mask = attention_mask.astype(jnp.int32)
        kv = KVCache([_to_step(k) for k in past[0::2]], [_to_step(v) for v in past[1::2]], mask, "concat")
        position_ids = position_ids_from_mask(mask, window)
        logits, kv = spec.step(spec.params, input_ids, mask, position_ids, kv)
        present = [_to_step(t[:, :, -window:]) for pair in zip(kv.keys, kv.values) for t in pair]
        return (logits.astype(spec.dtype), *present)

    return run


def window_specs(spec: DecoderSpec, window: int, max_length: int) -> list[Any]:
    """The static input shapes of the ``window``-token graph."""
    ids = jax.ShapeDtypeStruct((1, window), jnp.int32)
    mask = jax.ShapeDtypeStruct((1, max_length), jnp.int32)
    kv = jax.ShapeDtypeStruct(cache_shape(spec, max_length - window), spec.dtype)
    return [ids, mask, *([kv] * (2 * spec.num_layers))]


__all__ = ["CACHE_AXIS", "cache_shape", "window_specs", "window_step"]

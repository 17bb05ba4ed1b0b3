"""Greedy generation in JAX over a :class:`~jax2onnx_llm.spec.DecoderSpec`: the same step function,
jitted, with a static cache buffer. It is the JAX side of the tests for decoders that have no
``generate`` of their own, and of ``bench/llm_bench.py``.
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .spec import DecoderSpec, KVCache, position_ids_from_mask


def greedy_generate(spec: DecoderSpec, input_ids: Any, attention_mask: Any, max_new_tokens: int) -> np.ndarray:
    """``(batch, max_new_tokens)`` greedy tokens after left-padded prompts (``attention_mask`` 0 on padding)."""
    ids = jnp.asarray(input_ids, jnp.int32)
    mask = jnp.asarray(attention_mask, jnp.int32)
    return np.asarray(_generate(spec, max_new_tokens)(spec.params, ids, mask))


@functools.lru_cache(maxsize=16)
def _generate(spec: DecoderSpec, max_new_tokens: int) -> Any:
    def run(params: Any, ids: Any, mask: Any) -> Any:
        batch, prompt = ids.shape
        capacity = prompt + max_new_tokens
        shape = (batch, spec.num_kv_heads, capacity, spec.head_size)
        empty = tuple(jnp.zeros(shape, spec.dtype) for _ in range(spec.num_layers))
        full_mask = jnp.zeros((batch, capacity), jnp.int32).at[:, :prompt].set(mask)

        def step(tokens: Any, full_mask: Any, cache: Any, length: Any) -> Any:
            kv = KVCache(cache[0], cache[1], full_mask, "shared", length=length)
            pos = position_ids_from_mask(full_mask, tokens.shape[1], length)
            logits, kv = spec.step(params, tokens, full_mask, pos, kv)
            return jnp.argmax(logits[:, -1], axis=-1).astype(jnp.int32), (tuple(kv.keys), tuple(kv.values))

        first, cache = step(ids, full_mask, (empty, empty), jnp.int32(prompt))

        def body(carry: Any, i: Any) -> Any:
            token, full_mask, cache = carry
            length = prompt + i + 1
            full_mask = full_mask.at[:, length - 1].set(1)
            nxt, cache = step(token[:, None], full_mask, cache, length)
            return (nxt, full_mask, cache), token

        _, tokens = jax.lax.scan(body, (first, full_mask, cache), jnp.arange(max_new_tokens, dtype=jnp.int32))
        return tokens.T

    return jax.jit(run)

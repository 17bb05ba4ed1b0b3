"""The decoder spec: any causal LM written as a JAX step function, and the KV cache it reads and writes.

A decoder is exported from one function that serves prefill and decode alike::

    def step(params, input_ids, attention_mask, position_ids, cache) -> (logits, cache)

- ``input_ids``: ``(batch, sequence)`` int32, the new tokens (the whole prompt at prefill, one
  token per decode step).
- ``attention_mask``: ``(batch, past + sequence)`` int32, 1 for real tokens and 0 for padding; a
  batch of prompts of different lengths is padded on the left.
- ``position_ids``: ``(batch, sequence)`` int32, each new token's position counted over the real
  tokens of its row (``cumsum(attention_mask) - 1``, as Hugging Face and KerasHub count them); the
  exporter computes them from the mask, so padded rows are positioned as the library positions them.
- ``cache``: a :class:`KVCache` holding, per layer, keys and values ``(batch, kv_heads, T, head_size)``.
  The step writes the layer's new keys/values with ``cache.update(layer, k, v)``, which returns the
  full keys/values to attend to, and masks with ``cache.attention_bias(...)``, or calls
  :func:`attend`, which does both and grouped-query attention (and becomes onnxruntime's fused
  ``GroupQueryAttention`` with ``target="onnxruntime"``, the opset-23 ``Attention`` with
  ``target="onnx"``).
- ``logits``: ``(batch, sequence, vocab)`` float.

The step never needs to know the cache layout: with ``cache="concat"`` the past arrives with
``T = past`` and leaves as ``past + sequence`` (``update`` concatenates); with ``cache="shared"``
it is one ``(batch, kv_heads, max_length, head_size)`` buffer that ``update`` writes in place at
``past`` (onnxruntime-genai hands the same memory as ``past_key_values.N`` and ``present.N``).

:class:`DecoderSpec` holds the step, its parameters and the sizes ``genai_config.json`` needs. An
object with a ``__jax2onnx_decoder__()`` method returning one (the examples pack's NNX Llama does)
is accepted by :func:`jax2onnx_llm.export_causal_lm` directly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

CACHE_LAYOUTS = ("concat", "shared")
#: Symbolic dims of a decoder graph's inputs, in onnxruntime-genai's naming.
BATCH, SEQUENCE, PAST = "batch_size", "sequence_length", "past_sequence_length"


@dataclasses.dataclass(frozen=True, eq=False)
class DecoderSpec:
    """A causal decoder as a step function plus the facts onnxruntime-genai's config needs.

    Attributes:
        step: ``step(params, input_ids, attention_mask, position_ids, cache) -> (logits, cache)``
            (see the module docstring).
        params: the pytree of weights passed as the step's first argument (baked into the model).
        num_layers, num_heads, num_kv_heads, head_size, hidden_size, vocab_size: the model's sizes;
            ``num_kv_heads < num_heads`` is grouped-query attention.
        max_positions: the most positions the model can encode (learned position tables, RoPE
            tables); ``None`` when unlimited. ``max_length`` beyond it is refused.
        bos_token_id, eos_token_id, pad_token_id: the special tokens (``eos`` may be a list).
        model_type: ``genai_config.json``'s ``model.type`` (onnxruntime-genai's decoder-only types
            behave alike; the family name is informational).
        cache_layouts: the layouts this step can run (a step that writes its cache itself may
            support only one).
        dtype: the cache and logits dtype (float32).
        tokenizer: where the tokenizer files live, when the model carries one.
        prompts_start_with_bos: the library puts ``bos_token_id`` first in every prompt (a KerasHub
            preprocessor's ``add_start_token``): a pad id equal to it would take that token for padding.
    """

    step: Callable[..., Any]
    params: Any
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_size: int
    hidden_size: int
    vocab_size: int
    max_positions: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None
    model_type: str = "llama"
    cache_layouts: tuple[str, ...] = CACHE_LAYOUTS
    family: str = "jax function"
    dtype: Any = jnp.float32
    tokenizer: Any = None
    prompts_start_with_bos: bool = False


@jax.tree_util.register_pytree_node_class
class KVCache:
    """Per-layer keys and values of a decoder, in one of onnxruntime-genai's two layouts.

    ``keys[i]``/``values[i]``: ``(batch, kv_heads, T, head_size)``. ``update`` replaces a layer's
    entry (the object is rebuilt per step inside the trace, so this mutation is local to it).
    """

    def __init__(self, keys: tuple[Any, ...], values: tuple[Any, ...], attention_mask: Any, layout: str,
                 length: Any = None, max_length: int | None = None):
        if layout not in CACHE_LAYOUTS:
            raise ValueError(f"cache layout {layout!r}: use one of {CACHE_LAYOUTS}")
        self.keys = list(keys)
        self.values = list(values)
        self.attention_mask = attention_mask
        self.layout = layout
        # An explicit (traced) length lets a jitted loop keep one mask shape (B, capacity) for every
        # step (reference.greedy_generate); the exported graph reads it from the mask's shape.
        self.length = length
        # The export's max_length: every position is below it (GQA's rotary tables are this long).
        self.max_length = max_length

    def tree_flatten(self) -> tuple[Any, Any]:
        return (tuple(self.keys), tuple(self.values), self.attention_mask, self.length), (self.layout, self.max_length)

    @classmethod
    def tree_unflatten(cls, aux: tuple[str, int | None], children: Any) -> KVCache:
        keys, values, mask, length = children
        return cls(keys, values, mask, aux[0], length, aux[1])

    @property
    def total_length(self) -> Any:
        """``past + sequence``: the mask's length (a symbolic dim in the export), or the explicit length."""
        return self.attention_mask.shape[1] if self.length is None else self.length

    @property
    def capacity(self) -> Any:
        """How many positions the cache holds after this step (``total_length`` for concat,
        the static buffer length for shared)."""
        return self.total_length if self.layout == "concat" else self.keys[0].shape[2]

    def past_length(self, query_length: Any) -> Any:
        """Where this step's tokens start: ``total_length - sequence`` (a dim, or an int32
        scalar computed from the shapes)."""
        return self.total_length - query_length

    def update(self, layer: int, key: Any, value: Any) -> tuple[Any, Any]:
        """Write the layer's new ``(batch, kv_heads, sequence, head_size)`` keys/values and return
        the full ``(batch, kv_heads, capacity, head_size)`` keys/values to attend to."""
        past_k, past_v = self.keys[layer], self.values[layer]
        key, value = key.astype(past_k.dtype), value.astype(past_v.dtype)
        if self.layout == "concat":
            new_k = jnp.concatenate([past_k, key], axis=2)
            new_v = jnp.concatenate([past_v, value], axis=2)
        else:
            # A scatter at past..past+sequence, not dynamic_update_slice: that needs the update's
            # length provably <= the buffer's, which a symbolic sequence length is not.
            slots = jnp.asarray(self.past_length(key.shape[2]), jnp.int32) + jnp.arange(key.shape[2], dtype=jnp.int32)
            new_k = past_k.at[:, :, slots].set(key, mode="drop")
            new_v = past_v.at[:, :, slots].set(value, mode="drop")
        self.keys[layer], self.values[layer] = new_k, new_v
        return new_k, new_v

    def key_valid(self, query_length: Any) -> Any:
        """``(batch, 1, sequence, capacity)`` bool: which cached positions each new token may see
        (a real token at or before it; buffer slots past ``total_length`` never)."""
        mask = self.attention_mask.astype(bool)
        capacity = self.capacity
        if self.layout == "shared" and self.length is None:  # the mask covers the tokens so far, not the buffer
            mask = extend_to(mask, capacity)
        # Slots beyond this step's tokens (stale or empty buffer) fall out through causality.
        query_pos = self.past_length(query_length) + jnp.arange(query_length, dtype=jnp.int32)
        keys = jnp.arange(capacity, dtype=jnp.int32)[None, :]
        causal = keys <= query_pos[:, None]
        # Every token also sees itself: a padding token (which sees nothing else) then never has a
        # fully masked row, which in float16 (where the mask value is -inf) would softmax to NaN.
        itself = keys == query_pos[:, None]
        return (mask[:, None, None, :] & causal[None, None, :, :]) | itself[None, None, :, :]

    def attention_bias(self, query_length: Any, dtype: Any = jnp.float32) -> Any:
        """``key_valid`` as an additive ``(batch, 1, sequence, capacity)`` bias (0 or the dtype's
        lowest finite value: a row with nothing to see stays finite, never NaN)."""
        return jnp.where(self.key_valid(query_length), jnp.zeros((), dtype), jnp.finfo(dtype).min)


def _attend_reference(cache: KVCache, layer: int, q: Any, k: Any, v: Any, scale: float) -> Any:
    b, s, num_heads, head_size = q.shape
    keys, values = cache.update(layer, k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3))
    kv_heads = keys.shape[1]
    group = num_heads // kv_heads
    # (b, kv_heads, group, s, d): each KV head serves `group` query heads, with no repeated copy of K/V.
    qh = q.transpose(0, 2, 1, 3).reshape(b, kv_heads, group, s, head_size)
    scores = jnp.einsum("bhgsd,bhtd->bhgst", qh, keys.astype(q.dtype)) * scale
    scores = scores + cache.attention_bias(s, scores.dtype)[:, :, None]
    weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhgst,bhtd->bhgsd", weights, values.astype(q.dtype))
    return out.reshape(b, num_heads, s, head_size).transpose(0, 2, 1, 3)


class RotaryTables(tuple):
    """``(cos, sin)`` for the new tokens, remembering the positions and base they came from, so
    ``target="onnxruntime"`` can hand the rotation to ``GroupQueryAttention`` (``do_rotary``)."""

    position_ids: Any
    theta: float

    def __new__(cls, cos: Any, sin: Any, position_ids: Any, theta: float) -> RotaryTables:
        self = super().__new__(cls, (cos, sin))
        self.position_ids, self.theta = position_ids, theta
        return self


def rope_frequencies(head_size: int, theta: float) -> Any:
    return 1.0 / (theta ** (jnp.arange(0, head_size, 2, dtype=jnp.float32) / head_size))


def rotary_tables(position_ids: Any, head_size: int, theta: float = 10000.0, dtype: Any = jnp.float32) -> RotaryTables:
    """``(cos, sin)``, each ``(batch, sequence, head_size // 2)``, for RoPE at ``position_ids``."""
    angles = position_ids.astype(jnp.float32)[..., None] * rope_frequencies(head_size, theta)
    return RotaryTables(jnp.cos(angles).astype(dtype), jnp.sin(angles).astype(dtype), position_ids, theta)


def apply_rotary(x: Any, cos: Any, sin: Any) -> Any:
    """Rotate ``(batch, sequence, heads, head_size)`` by the half-split RoPE convention."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, :, None, :].astype(x.dtype), sin[:, :, None, :].astype(x.dtype)
    return jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def position_ids_from_mask(attention_mask: Any, query_length: Any, total_length: Any = None) -> Any:
    """``(batch, sequence)`` int32 positions of the new tokens: each counts the real tokens of its row
    before it (``cumsum(mask) - 1``, as Hugging Face and KerasHub position left-padded rows);
    padding gets 0 (its outputs are never read). ``total_length``: the tokens so far when the mask
    is longer (a static buffer), else the mask's length."""
    positions = jnp.maximum(jnp.cumsum(attention_mask, axis=1, dtype=jnp.int32) - 1, 0)
    if total_length is None:
        return positions[:, attention_mask.shape[1] - query_length :]
    start = jnp.asarray(total_length, jnp.int32) - query_length
    return jax.lax.dynamic_slice_in_dim(positions, start, query_length, axis=1)


def extend_to(flags: Any, capacity: int) -> Any:
    """``(batch, T)`` bool flags as ``(batch, capacity)`` with False beyond ``T``, for a symbolic
    ``T <= capacity`` (a gather: a concatenation would need ``capacity - T >= 0`` proven)."""
    length = flags.shape[1]
    idx = jnp.arange(capacity, dtype=jnp.int32)
    # indices in 0..length-1: in bounds, so the gather needs none of jnp.take's index checks
    gathered = flags.at[:, jnp.minimum(idx, length - 1)].get(mode="promise_in_bounds")
    return gathered & (idx < length)[None, :]

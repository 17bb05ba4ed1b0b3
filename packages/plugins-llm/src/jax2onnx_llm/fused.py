"""``target="onnxruntime"``: :func:`~jax2onnx_llm.attend` as onnxruntime's ``GroupQueryAttention``.

``attend`` runs as a marked region (operands: queries, this step's keys/values, the layer's past
keys/values, the additive mask over ``past + sequence``); its body is the standard-ONNX attention
(``spec._attend_reference``), so a declined region is still exact. The lowering emits one
``com.microsoft.GroupQueryAttention`` that writes the cache and attends in one kernel:

- ``seqlens_k`` is ``past + sequence - 1`` for every row and ``total_sequence_length`` the mask's
  length: the cache holds each row at its physical slots (a left-padded row's padding included),
  so every row writes at ``past``; padding and causality come in as ``attention_bias``
  (``(batch, 1, sequence, past + sequence)``), which GQA adds to the scores;
- past and present are the layer's graph input and output (layer 0's past goes through the
  padding-marker cleanup first), so with ``cache="shared"`` onnxruntime-genai binds one buffer to
  both and GQA writes in place;
- with tables from ``rotary_tables``, GQA rotates q and k itself (``do_rotary``, cos/sin tables of
  ``max_length`` rows), see the lowering for how positions are numbered.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import onnx_ir as ir
from jax2onnx.plugin import Lowerings, marked_call

from .spec import (
    ATTENTION_MARK,
    KVCache,
    RotaryTables,
    _attend_reference,
    apply_rotary,
    rope_frequencies,
    rotary_tables,
)

lowerings = Lowerings()


def attend_fused(cache: KVCache, layer: int, q: Any, k: Any, v: Any, *, scale: float, rotary: Any = None) -> Any:
    seq = q.shape[1]
    total = cache.total_length
    past_len = cache.past_length(seq)
    query_pos = past_len + jnp.arange(seq, dtype=jnp.int32)
    keys = jnp.arange(total, dtype=jnp.int32)[None, :]
    causal = keys <= query_pos[:, None]
    itself = keys == query_pos[:, None]  # as KVCache.key_valid: no fully masked row, even for padding
    visible = ((cache.attention_mask > 0)[:, None, None, :] & causal[None, None]) | itself[None, None]
    bias = jnp.where(visible, jnp.zeros((), q.dtype), jnp.finfo(q.dtype).min)  # (batch, 1, seq, total)
    # GQA rotates q and k itself (do_rotary) from cos/sin tables; its kernel wants head_size % 16 == 0.
    if isinstance(rotary, RotaryTables) and cache.max_length is not None and q.shape[-1] % 16 == 0:
        positions = rotary.position_ids.astype(jnp.int32)
        out, new_k, new_v = marked_call(
            ATTENTION_MARK, _region, q, k, v, cache.keys[layer], cache.values[layer], bias, positions,
            layout=cache.layout, scale=float(scale), theta=float(rotary.theta), max_length=int(cache.max_length),
        )
    else:
        if rotary is not None:
            cos, sin = rotary
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out, new_k, new_v = marked_call(
            ATTENTION_MARK, _region, q, k, v, cache.keys[layer], cache.values[layer], bias,
            layout=cache.layout, scale=float(scale), theta=None, max_length=None,
        )
    cache.keys[layer], cache.values[layer] = new_k, new_v
    return out


def _region(q: Any, k: Any, v: Any, past_k: Any, past_v: Any, bias: Any, positions: Any = None, *, layout: str,
            scale: float, theta: float | None, max_length: int | None) -> Any:
    """The region's body: (the rotation, then) the reference attention, its mask rebuilt from the
    bias's valid entries."""
    if positions is not None:
        cos, sin = rotary_tables(positions, q.shape[-1], theta)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
    # The mask's columns are the keys' validity for the last query row (causality allows it all).
    mask = (bias[:, 0, -1, :] == 0).astype(jnp.int32)
    local = KVCache([past_k], [past_v], mask, layout)
    out = _attend_reference(local, 0, q, k, v, scale)
    return out, local.keys[0], local.values[0]


@lowerings.register(f"call:{ATTENTION_MARK}")
def lower_group_query_attention(ctx: Any, q: ir.Value, k: ir.Value, v: ir.Value, past_k: ir.Value,
                                past_v: ir.Value, bias: ir.Value, positions: ir.Value | None = None) -> Any:
    q_aval, k_aval = ctx.avals_in[0], ctx.avals_in[1]
    _, _, num_heads, head_size = q_aval.shape
    kv_heads = k_aval.shape[2]
    flat = ctx.i64([0, 0, -1])
    q3, k3, v3 = ctx.op.Reshape(q, flat), ctx.op.Reshape(k, flat), ctx.op.Reshape(v, flat)
    total = ctx.op.Shape(bias, start=3, end=4)  # [past + sequence]
    batch = ctx.op.Shape(q, start=0, end=1)
    seqlens_k = ctx.cast(ctx.op.Expand(ctx.op.Sub(total, ctx.i64([1])), batch), jnp.int32)
    total_len = ctx.cast(ctx.op.Squeeze(total, ctx.i64([0])), jnp.int32)
    params = ctx.marked.params
    cos_cache = sin_cache = None
    if positions is not None:
        # GQA rotates each token by its physical slot (past + i), the same in prefill and decode; a
        # left-padded row is thereby shifted by its padding, which rotary scores (functions of
        # position differences) do not see. The body's positions count real tokens instead; GQA's
        # position_ids input is left out, since its CPU kernel does not apply it in decode steps
        # and the two numberings would mix.
        angles = np.arange(params["max_length"], dtype=np.float32)[:, None] * np.asarray(
            rope_frequencies(int(head_size), params["theta"]))
        cos_cache, sin_cache = ctx.const(np.cos(angles), np.float32), ctx.const(np.sin(angles), np.float32)
    out, present_k, present_v = ctx.op.GroupQueryAttention(
        q3, k3, v3, past_k, past_v, seqlens_k, total_len, cos_cache, sin_cache, None, bias,
        num_heads=int(num_heads), kv_num_heads=int(kv_heads), scale=float(params["scale"]),
        do_rotary=1 if positions is not None else 0, rotary_interleaved=0,
        _domain="com.microsoft", _outputs=3, _name="gqa",
    )
    for value, aval in ((out, ctx.avals_out[0]), (present_k, ctx.avals_out[1]), (present_v, ctx.avals_out[2])):
        value.type = ir.TensorType(ir.DataType.from_numpy(np.dtype(aval.dtype)))  # no schema types a contrib op
    out4 = ctx.op.Reshape(out, ctx.op.Concat(ctx.op.Shape(q, start=0, end=2), ctx.i64([int(num_heads), int(head_size)]), axis=0))
    return out4, present_k, present_v


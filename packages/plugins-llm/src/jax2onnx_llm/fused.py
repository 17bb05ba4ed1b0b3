"""``target="onnxruntime"``: :func:`~jax2onnx_llm.attend` as onnxruntime's ``GroupQueryAttention``.

``attend`` runs as a marked region (operands: queries, this step's keys/values, the layer's past
keys/values, the additive mask over ``past + sequence``); its body is the standard-ONNX attention
(``spec._attend_reference``), so a declined region is still exact. The lowering emits one
``com.microsoft.GroupQueryAttention`` that writes the cache and attends in one kernel:

- ``seqlens_k`` is ``past + sequence - 1`` for every row and ``total_sequence_length`` the mask's
  length: the cache holds each row at its physical slots (a left-padded row's padding included),
  so every row writes at ``past``; padding and causality come in as ``attention_bias``
  (``(batch, 1, sequence, past + sequence)``), which GQA adds to the scores;
- past and present are the layer's graph input and output, so with ``cache="shared"``
  onnxruntime-genai binds one buffer to both and GQA writes in place.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import onnx_ir as ir
from jax2onnx.plugin import Lowerings, marked_call

from .spec import ATTENTION_MARK, KVCache, _attend_reference

lowerings = Lowerings()


def attend_fused(cache: KVCache, layer: int, q: Any, k: Any, v: Any, *, scale: float) -> Any:
    seq = q.shape[1]
    total = cache.total_length
    past_len = cache.past_length(seq)
    query_pos = past_len + jnp.arange(seq, dtype=jnp.int32)
    causal = jnp.arange(total, dtype=jnp.int32)[None, :] <= query_pos[:, None]
    visible = (cache.attention_mask > 0)[:, None, None, :] & causal[None, None]
    bias = jnp.where(visible, jnp.zeros((), q.dtype), jnp.finfo(q.dtype).min)  # (batch, 1, seq, total)
    out, new_k, new_v = marked_call(
        ATTENTION_MARK, _region, q, k, v, cache.keys[layer], cache.values[layer], bias,
        layout=cache.layout, scale=float(scale),
    )
    cache.keys[layer], cache.values[layer] = new_k, new_v
    return out


def _region(q: Any, k: Any, v: Any, past_k: Any, past_v: Any, bias: Any, *, layout: str, scale: float) -> Any:
    """The region's body: the reference attention, its mask rebuilt from the bias's valid entries."""
    # The mask's columns are the keys' validity for the last query row (causality allows it all).
    mask = (bias[:, 0, -1, :] == 0).astype(jnp.int32)
    local = KVCache([past_k], [past_v], mask, layout)
    out = _attend_reference(local, 0, q, k, v, scale)
    return out, local.keys[0], local.values[0]


@lowerings.register(f"call:{ATTENTION_MARK}")
def lower_group_query_attention(ctx: Any, q: ir.Value, k: ir.Value, v: ir.Value, past_k: ir.Value,
                                past_v: ir.Value, bias: ir.Value) -> Any:
    q_aval, k_aval = ctx.avals_in[0], ctx.avals_in[1]
    _, _, num_heads, head_size = q_aval.shape
    kv_heads = k_aval.shape[2]
    flat = ctx.i64([0, 0, -1])
    q3, k3, v3 = ctx.op.Reshape(q, flat), ctx.op.Reshape(k, flat), ctx.op.Reshape(v, flat)
    total = ctx.op.Shape(bias, start=3, end=4)  # [past + sequence]
    batch = ctx.op.Shape(q, start=0, end=1)
    seqlens_k = ctx.cast(ctx.op.Expand(ctx.op.Sub(total, ctx.i64([1])), batch), jnp.int32)
    total_len = ctx.cast(ctx.op.Squeeze(total, ctx.i64([0])), jnp.int32)
    out, present_k, present_v = ctx.op.GroupQueryAttention(
        q3, k3, v3, past_k, past_v, seqlens_k, total_len, None, None, None, bias,
        num_heads=int(num_heads), kv_num_heads=int(kv_heads), scale=float(ctx.marked.params["scale"]),
        _domain="com.microsoft", _outputs=3, _name="gqa",
    )
    for value, aval in ((out, ctx.avals_out[0]), (present_k, ctx.avals_out[1]), (present_v, ctx.avals_out[2])):
        value.type = ir.TensorType(ir.DataType.FLOAT if aval.dtype == jnp.float32 else ir.DataType.FLOAT16)
    out4 = ctx.op.Reshape(out, ctx.op.Concat(ctx.op.Shape(q, start=0, end=2), ctx.i64([int(num_heads), int(head_size)]), axis=0))
    return out4, present_k, present_v


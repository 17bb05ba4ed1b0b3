"""The ``gemma`` library's attention core (scaled, soft-capped, windowed softmax over the cache) as one fused op.

The library's ``Attention.__call__`` projects, normalizes and rotates inline and then attends with its
own mask; the adapter (``adapter.py``) keeps the library's projections, norms and rotation and hands
the rotated queries and keys here. :func:`attend_gemma` is a marked region whose body is the
reference computation (a declined region is exact) and whose lowering emits:

- ``target="onnxruntime"``: ``com.microsoft.GroupQueryAttention`` with ``softcap`` (the library's
  ``attn_logits_soft_cap``) and the window in its ``attention_bias``;
- ``target="onnx"``: the opset-23 ``Attention``, its ``softcap`` likewise (both cap the scores before
  the mask is added, as the library does).

The scale is the library's ``query_pre_attn_scalar`` (it multiplies the queries; the ops multiply the
scores, which is the same product). The sliding window is the library's ``create_sliding_mask``
(``key > query - window``) over the slots of the cache, which for a left-padded row differ from the
library's positions by the padding only, so the differences it compares are the same.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import onnx_ir as ir
from jax2onnx.plugin import Lowerings, exporting, marked_call

from ...attention_report import tag
from ...fused import additive_bias, fused_kind, group_query_attention, onnx_attention
from ...spec import KVCache

lowerings = Lowerings()

MARK = "jax2onnx_llm.gemma_lib.attention"


def attend_gemma(cache: KVCache, layer: int, q: Any, k: Any, v: Any, *, scale: float, softcap: float | None,
                 window: int | None, reader: int | None = None) -> Any:
    """``(batch, seq, heads, head)`` rotated q over the cache after writing this step's k/v
    ``(batch, seq, kv_heads, head)`` into ``cache``'s ``layer``; returns ``(batch, seq, heads, head)``.
    ``reader``: a KV-shared layer attending over ``layer``'s past and step keys (Gemma 3n:
    ``gemma3n.py``), which the attention report names and whose cache write nobody reads."""
    seq = q.shape[1]
    if not exporting() or cache.length is not None:  # a jitted loop with an explicit length: the plain math
        keys, values = cache.update(layer, k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3))
        valid = cache.key_valid(seq) & _inside(cache.past_length(seq), seq, keys.shape[2], window)
        bias = jnp.where(valid, jnp.zeros((), q.dtype), jnp.finfo(q.dtype).min)
        return _core(q, keys, values, bias, scale, softcap)
    bias = additive_bias(cache.attention_mask, cache.past_length(seq), seq, cache.total_length, q.dtype)
    bias = jnp.where(_inside(cache.past_length(seq), seq, cache.total_length, window), bias, jnp.finfo(q.dtype).min)
    out, new_k, new_v = marked_call(MARK, _region, q, k, v, cache.keys[layer], cache.values[layer], bias,
                                    layout=cache.layout, scale=float(scale), softcap=float(softcap or 0.0),
                                    layer=layer if reader is None else reader, reads_only=reader is not None)
    cache.keys[layer], cache.values[layer] = new_k, new_v
    return out


def _inside(past: Any, seq: int, total: Any, window: int | None) -> Any:
    """``(1, 1, seq, total)``: the keys inside the layer's sliding window (all of them without one)."""
    if window is None:
        return jnp.ones((1, 1, 1, 1), bool)
    query = jnp.asarray(past, jnp.int32) + jnp.arange(seq, dtype=jnp.int32)
    keys = jnp.arange(total, dtype=jnp.int32)
    return (keys[None, :] > query[:, None] - window)[None, None]


def _core(q: Any, keys: Any, values: Any, bias: Any, scale: float, softcap: float | None) -> Any:
    """The library's core: scores of the scaled queries, soft-capped, masked, softmax (grouped heads)."""
    b, s, heads, head = q.shape
    kv_heads = keys.shape[1]
    qh = q.transpose(0, 2, 1, 3).reshape(b, kv_heads, heads // kv_heads, s, head)
    scores = jnp.einsum("bhgsd,bhtd->bhgst", qh * scale, keys.astype(q.dtype))
    if softcap:
        scores = jnp.tanh(scores / softcap) * softcap
    weights = jax.nn.softmax(scores + bias[:, :, None], axis=-1)
    out = jnp.einsum("bhgst,bhtd->bhgsd", weights, values.astype(q.dtype))
    return out.reshape(b, heads, s, head).transpose(0, 2, 1, 3)


def _region(q: Any, k: Any, v: Any, past_k: Any, past_v: Any, bias: Any, *, layout: str, scale: float,
            softcap: float, layer: int = -1, reads_only: bool = False) -> Any:
    """The region's body: write the cache, attend with the bias as given (its rows differ under a window)."""
    total = bias.shape[3]
    local = KVCache([past_k], [past_v], jnp.zeros((bias.shape[0], total), jnp.int32), layout)
    keys, values = local.update(0, k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3))
    if layout == "shared":  # the bias covers past + seq slots, the buffer more: the rest masked
        capacity = keys.shape[2]
        slots = jnp.arange(capacity, dtype=jnp.int32)
        bias = jnp.take(bias, jnp.minimum(slots, total - 1), axis=3)
        bias = jnp.where(slots < total, bias, jnp.finfo(bias.dtype).min)
    return _core(q, keys, values, bias, scale, softcap or None), local.keys[0], local.values[0]


@lowerings.register(f"call:{MARK}")
def lower_gemma_attention(ctx: Any, q: ir.Value, k: ir.Value, v: ir.Value, past_k: ir.Value, past_v: ir.Value,
                          bias: ir.Value) -> Any:
    kind = fused_kind(ctx)
    params = ctx.marked.params
    layer, softcap = params.get("layer", -1), float(params["softcap"])
    if kind is None:
        return None
    q_aval, k_aval, pk_aval = ctx.avals_in[0], ctx.avals_in[1], ctx.avals_in[3]
    _, _, heads, head = q_aval.shape
    total = ctx.op.Shape(bias, start=3, end=4)
    common = dict(num_heads=int(heads), kv_heads=int(k_aval.shape[2]), head_size=int(head),
                  scale=float(params["scale"]), rotary=None, dtypes=(q_aval.dtype, pk_aval.dtype))
    if kind == "gqa":
        outs = group_query_attention(ctx, q, k, v, past_k, past_v, bias, total, softcap=softcap, **common)
    elif params.get("reads_only") and params["layout"] == "concat":
        outs = _attention_reading_only(ctx, q, k, v, past_k, past_v, bias, scale=common["scale"], softcap=softcap)
    else:
        outs = onnx_attention(ctx, q, k, v, past_k, past_v, bias, total, layout=params["layout"], softcap=softcap,
                              **common)
    tag(outs[0], layer)
    return outs


def _attention_reading_only(ctx: Any, q: ir.Value, k: ir.Value, v: ir.Value, past_k: ir.Value, past_v: ir.Value,
                            bias: ir.Value, *, scale: float, softcap: float) -> tuple[ir.Value, ...]:
    """A KV-shared layer over the growing cache (``target="onnx"``): the opset-23 ``Attention`` over the
    past and step keys concatenated, with no past input. Its ``present`` would be unread, and
    onnxruntime refuses an ``Attention`` given a past whose ``present`` outputs were pruned."""
    perm = [0, 2, 1, 3]
    keys = ctx.op.Concat(past_k, ctx.op.Transpose(k, perm=perm), axis=2)
    values = ctx.op.Concat(past_v, ctx.op.Transpose(v, perm=perm), axis=2)
    y = ctx.op.Attention(ctx.op.Transpose(q, perm=perm), keys, values, bias, scale=float(scale),
                         **({"softcap": float(softcap)} if softcap else {}))
    return ctx.op.Transpose(y, perm=perm), keys, values

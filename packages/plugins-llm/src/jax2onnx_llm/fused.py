"""Attention over the KV cache as one fused op, chosen per export from its ``target``.

:func:`~jax2onnx_llm.attend` runs inside an export as a marked region (operands: queries, this
step's keys/values, the layer's past keys/values, the additive mask over ``past + sequence``, and
the new tokens' positions when the rotary tables are :func:`~jax2onnx_llm.rotary_tables`'); its
body is the standard-ONNX attention (``spec._attend_reference``), so a declined region is exact.
The lowering reads the export's options (``ctx.options``, never a module global: two threads
exporting different targets at once each get their own) and emits:

- ``target="onnxruntime"``: one ``com.microsoft.GroupQueryAttention``, which writes the cache and
  attends in one kernel. Rotary inside it (``do_rotary``) when the head size is a multiple of 16
  (its CPU kernel's requirement), else a ``com.microsoft.RotaryEmbedding`` on q and k before it;
- standard ONNX (``target="onnx"``) at opset >= 23: the opset-23 ``Attention`` (grouped-query
  through its head counts), with ``past_key``/``past_value`` in and ``present_key``/
  ``present_value`` out for the growing cache; for the shared buffer (written in place at
  ``past``, which ``Attention``'s concatenating ``present`` cannot express) the keys/values are
  scattered into the buffer first and ``Attention`` reads the whole buffer, the unused slots
  masked. Rotary: the opset-23 ``RotaryEmbedding``. onnxruntime 1.32 runs both on CPU;
- any other target or opset, and a target writing static NPU graphs (``can("static-llm")``, ``"qdq"``):
  declined, the body's decomposed form (its matmuls are what an NPU runs as integer kernels).

GroupQueryAttention's inputs (:func:`group_query_attention`):

- ``seqlens_k`` is ``past + sequence - 1`` for every row and ``total_sequence_length`` the mask's
  length: the cache holds each row at its physical slots (a left-padded row's padding included),
  so every row writes at ``past``; padding and causality come in as ``attention_bias``
  (``(batch, 1, sequence, past + sequence)``), which GQA adds to the scores;
- past and present are the layer's graph input and output (layer 0's past goes through the
  padding-marker cleanup first), so with ``cache="shared"`` onnxruntime-genai binds one buffer to
  both and GQA writes in place.

The emitters here (:func:`emit_attention`) are shared with the regions of the library attention
layers (``hf_attention.py``, ``keras_attention.py``). Measured (``bench/llm_attention_ops.py``, one
decode step, 1 thread): ``Attention`` and GQA both below the decomposed attention's CPU time.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import onnx_ir as ir
from jax2onnx.plugin import Lowerings, marked_call

from .attention_report import tag
from .spec import (
    KVCache,
    RotaryTables,
    _attend_reference,
    apply_rotary,
    rope_frequencies,
    rotary_tables,
)

lowerings = Lowerings()

#: ``attend``'s region inside an export (:func:`attend_region`); its lowering picks the fused op by the export's target.
ATTENTION_MARK = "jax2onnx_llm.attention"

#: GroupQueryAttention's CPU kernel rotates (``do_rotary``) only head sizes that are multiples of 16.
GQA_ROTARY_MULTIPLE = 16  # (onnxruntime 1.32; the NNX Llama, head size 16, rotates inside GQA)


def additive_bias(mask: Any, past_len: Any, seq: int, total: Any, dtype: Any) -> Any:
    """``(batch, 1, seq, total)`` 0 / lowest-finite bias: a real key at or before the query, and
    the query itself (as ``KVCache.key_valid``: a padding row is never fully masked)."""
    query_pos = past_len + jnp.arange(seq, dtype=jnp.int32)
    keys = jnp.arange(total, dtype=jnp.int32)[None, :]
    causal = keys <= query_pos[:, None]
    itself = keys == query_pos[:, None]
    visible = ((mask > 0)[:, None, None, :] & causal[None, None]) | itself[None, None]
    return jnp.where(visible, jnp.zeros((), dtype), jnp.finfo(dtype).min)


def attend_region(cache: KVCache, layer: int, q: Any, k: Any, v: Any, *, scale: float, rotary: Any = None) -> Any:
    """``attend`` inside an export: the marked region the lowering below fuses."""
    seq = q.shape[1]
    bias = additive_bias(cache.attention_mask, cache.past_length(seq), seq, cache.total_length, q.dtype)
    if isinstance(rotary, RotaryTables) and cache.max_length is not None:
        # The positions travel into the region, so the lowering rotates with a fused op.
        positions = rotary.position_ids.astype(jnp.int32)
        out, new_k, new_v = marked_call(
            ATTENTION_MARK, _region, q, k, v, cache.keys[layer], cache.values[layer], bias, positions,
            layout=cache.layout, scale=float(scale), theta=float(rotary.theta), max_length=int(cache.max_length),
            layer=layer,
        )
    else:
        if rotary is not None:  # tables of unknown origin: rotated in the graph before the region
            cos, sin = rotary
            q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        out, new_k, new_v = marked_call(
            ATTENTION_MARK, _region, q, k, v, cache.keys[layer], cache.values[layer], bias,
            layout=cache.layout, scale=float(scale), theta=None, max_length=None, layer=layer,
        )
    cache.keys[layer], cache.values[layer] = new_k, new_v
    return out


def _region(q: Any, k: Any, v: Any, past_k: Any, past_v: Any, bias: Any, positions: Any = None, *, layout: str,
            scale: float, theta: float | None, max_length: int | None, layer: int = -1) -> Any:
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


def fused_kind(ctx: Any) -> str | None:
    """Which fused attention this export gets: ``"gqa"``, ``"attention"`` or None (decline)."""
    if ctx.options is None:  # lowered outside an export: the body
        return None
    if ctx.target.can("static-llm"):  # an NPU's static graphs: the body, whose matmuls the QDQ form quantizes
        return None
    if ctx.target.allows("GroupQueryAttention", "com.microsoft"):
        return "gqa"
    if ctx.has_op("Attention") and ctx.has_op("RotaryEmbedding"):
        return "attention"
    return None


@lowerings.register(f"call:{ATTENTION_MARK}")
def lower_attention(ctx: Any, q: ir.Value, k: ir.Value, v: ir.Value, past_k: ir.Value,
                    past_v: ir.Value, bias: ir.Value, positions: ir.Value | None = None) -> Any:
    kind = fused_kind(ctx)
    if kind is None:
        return None
    q_aval, k_aval, pk_aval = ctx.avals_in[0], ctx.avals_in[1], ctx.avals_in[3]
    _, _, num_heads, head_size = q_aval.shape
    params = ctx.marked.params
    rotary = None
    if positions is not None:
        angles = np.arange(params["max_length"], dtype=np.float32)[:, None] * np.asarray(
            rope_frequencies(int(head_size), params["theta"]))
        rotary = (positions, np.cos(angles), np.sin(angles))  # as rotary_tables computes them
    outs = emit_attention(
        ctx, kind, q, k, v, past_k, past_v, bias, ctx.op.Shape(bias, start=3, end=4), layout=params["layout"],
        num_heads=int(num_heads), kv_heads=int(k_aval.shape[2]), head_size=int(head_size),
        scale=float(params["scale"]), rotary=rotary, dtypes=(q_aval.dtype, pk_aval.dtype),
    )
    tag(outs[0], params.get("layer", -1))
    return outs


#: (positions (batch, seq), cos, sin (rows, head_size // 2): numpy tables or values computed in the graph)
Rotary = tuple[ir.Value, Any, Any]


def _table(ctx: Any, table: Any) -> ir.Value:
    return ctx.const(table, np.float32) if isinstance(table, np.ndarray) else table


def emit_attention(ctx: Any, kind: str, q: ir.Value, k: ir.Value, v: ir.Value, past_k: ir.Value, past_v: ir.Value,
                   bias: ir.Value, total: ir.Value, *, layout: str, num_heads: int, kv_heads: int, head_size: int,
                   scale: float, rotary: Rotary | None, dtypes: tuple[Any, Any],
                   bias_columns: str = "total") -> tuple[ir.Value, ...]:
    """Attention of ``(batch, seq, heads, head_size)`` q/k/v over the cache ``(batch, kv_heads, T,
    head_size)`` (``layout`` ``"concat"``: ``T = past``; ``"shared"``: a buffer written at ``past``).

    ``total``: ``[past + seq]`` (int64); ``bias``: the additive mask ``(batch, 1, seq, L)``,
    ``bias_columns`` ``"total"``: ``L = past + seq``; ``"buffer"`` (shared layout only): ``L = T``,
    the columns past ``past + seq`` masked;
    ``rotary``: rotate q and k by these tables at these positions. ``dtypes``: (q's, the cache's).
    Returns ``(out (batch, seq, heads, head_size), present_k, present_v)``."""
    if kind == "gqa":
        return group_query_attention(ctx, q, k, v, past_k, past_v, bias, total, num_heads=num_heads,
                                     kv_heads=kv_heads, head_size=head_size, scale=scale, rotary=rotary, dtypes=dtypes,
                                     bias_columns=bias_columns)
    return onnx_attention(ctx, q, k, v, past_k, past_v, bias, total, num_heads=num_heads, kv_heads=kv_heads,
                          head_size=head_size, scale=scale, layout=layout, rotary=rotary, dtypes=dtypes)


def _typed(value: ir.Value, dtype: Any) -> ir.Value:
    value.type = ir.TensorType(ir.DataType.from_numpy(np.dtype(dtype)))  # no schema types a contrib op
    return value


def _columns(ctx: Any, bias: ir.Value, length: ir.Value) -> ir.Value:
    """The bias's first ``length`` key columns (a no-op Slice when it has exactly those)."""
    return ctx.op.Slice(bias, ctx.i64([0]), length, ctx.i64([3]))


def group_query_attention(ctx: Any, q: ir.Value, k: ir.Value, v: ir.Value, past_k: ir.Value, past_v: ir.Value,
                          bias: ir.Value, total: ir.Value, *, num_heads: int, kv_heads: int, head_size: int,
                          scale: float, rotary: Rotary | None, dtypes: tuple[Any, Any],
                          bias_columns: str = "total", softcap: float = 0.0,
                          head_sink: ir.Value | None = None) -> tuple[ir.Value, ...]:
    """``softcap``: ``softcap * tanh(scores / softcap)`` before the bias (0: none); ``head_sink``:
    a logit per query head that joins each softmax's denominator (GPT-OSS's sinks)."""
    q_dtype, cache_dtype = dtypes
    flat = ctx.i64([0, 0, -1])
    q3, k3, v3 = ctx.op.Reshape(q, flat), ctx.op.Reshape(k, flat), ctx.op.Reshape(v, flat)
    batch = ctx.op.Shape(q, start=0, end=1)
    seqlens_k = ctx.cast(ctx.op.Expand(ctx.op.Sub(total, ctx.i64([1])), batch), jnp.int32)
    total_len = ctx.cast(ctx.op.Squeeze(total, ctx.i64([0])), jnp.int32)
    if bias_columns == "buffer":  # GQA's attention_bias has past + seq columns
        bias = _columns(ctx, bias, total)
    cos_cache = sin_cache = None
    do_rotary = 0
    if rotary is not None:
        positions, cos, sin = rotary
        cos, sin = _table(ctx, cos), _table(ctx, sin)
        if head_size % GQA_ROTARY_MULTIPLE == 0:
            # GQA rotates each token by its physical slot (past + i), the same in prefill and decode;
            # a left-padded row is thereby shifted by its padding, which rotary scores (functions of
            # position differences) do not see. GQA's position_ids input is left out, since its CPU
            # kernel does not apply it in decode steps and the two numberings would mix.
            cos_cache, sin_cache, do_rotary = cos, sin, 1
        else:
            pos = ctx.cast(positions, jnp.int64)
            q3 = _typed(ctx.op.RotaryEmbedding(q3, pos, cos, sin, num_heads=num_heads, interleaved=0,
                                               _domain="com.microsoft"), q_dtype)
            k3 = _typed(ctx.op.RotaryEmbedding(k3, pos, cos, sin, num_heads=kv_heads, interleaved=0,
                                               _domain="com.microsoft"), q_dtype)
    out, present_k, present_v = ctx.op.GroupQueryAttention(
        q3, k3, v3, past_k, past_v, seqlens_k, total_len, cos_cache, sin_cache, None, bias,
        *([head_sink] if head_sink is not None else []),
        num_heads=num_heads, kv_num_heads=kv_heads, scale=float(scale), do_rotary=do_rotary, rotary_interleaved=0,
        **({"softcap": float(softcap)} if softcap else {}), _domain="com.microsoft", _outputs=3, _name="gqa",
    )
    _typed(out, q_dtype), _typed(present_k, cache_dtype), _typed(present_v, cache_dtype)
    if q.shape is not None and len(q.shape) == 4:  # q3's: lets the passes see the Reshapes around it cancel
        out.shape = ir.Shape([q.shape[0], q.shape[1], num_heads * head_size])
    out4 = ctx.op.Reshape(out, ctx.op.Concat(ctx.op.Shape(q, start=0, end=2), ctx.i64([num_heads, head_size]), axis=0))
    return out4, present_k, present_v


def onnx_attention(ctx: Any, q: ir.Value, k: ir.Value, v: ir.Value, past_k: ir.Value, past_v: ir.Value,
                   bias: ir.Value, total: ir.Value, *, num_heads: int, kv_heads: int, head_size: int, scale: float,
                   layout: str, rotary: Rotary | None, dtypes: tuple[Any, Any],
                   softcap: float = 0.0) -> tuple[ir.Value, ...]:
    """The opset-23 ``Attention`` (4-D q/k/v: ``(batch, heads, seq, head_size)``); ``softcap``: its
    ``softcap`` attribute, ``softcap * tanh(scores / softcap)`` before the bias (0: none)."""
    q_dtype, cache_dtype = dtypes
    perm = [0, 2, 1, 3]
    q4, k4, v4 = ctx.op.Transpose(q, perm=perm), ctx.op.Transpose(k, perm=perm), ctx.op.Transpose(v, perm=perm)
    if rotary is not None:
        positions, cos, sin = rotary
        cos, sin = _table(ctx, cos), _table(ctx, sin)
        pos = ctx.cast(positions, jnp.int64)
        q4 = _typed(ctx.op.RotaryEmbedding(q4, cos, sin, pos, interleaved=0), q_dtype)
        k4 = _typed(ctx.op.RotaryEmbedding(k4, cos, sin, pos, interleaved=0), q_dtype)
    k4, v4 = ctx.cast(k4, cache_dtype), ctx.cast(v4, cache_dtype)
    capped = {"softcap": float(softcap)} if softcap else {}
    if layout == "concat":
        y, present_k, present_v = ctx.op.Attention(q4, k4, v4, bias, past_k, past_v, scale=float(scale), _outputs=3,
                                                   **capped)
    else:
        # The shared buffer: write this step's keys/values at past.. (a scatter along the length
        # axis; Attention's own present would append after the whole buffer), then attend over
        # the whole buffer, the slots past ``past + seq`` masked.
        seq = ctx.op.Shape(q, start=1, end=2)
        slots = ctx.op.Range(ctx.op.Squeeze(ctx.op.Sub(total, seq), ctx.i64([0])),
                             ctx.op.Squeeze(total, ctx.i64([0])), ctx.i64(1))
        index = ctx.op.Expand(ctx.op.Reshape(slots, ctx.i64([1, 1, -1, 1])), ctx.op.Shape(k4))
        present_k = ctx.op.ScatterElements(past_k, index, k4, axis=2)
        present_v = ctx.op.ScatterElements(past_v, index, v4, axis=2)
        capacity = ctx.op.Shape(past_k, start=2, end=3)
        # a bias over past + seq columns is padded to the buffer (a bias over the buffer: pads 0)
        pads = ctx.op.Concat(ctx.i64([0, 0, 0, 0, 0, 0, 0]), ctx.op.Sub(capacity, ctx.op.Shape(bias, start=3, end=4)),
                             axis=0)
        lowest = ctx.const(np.asarray(np.finfo(np.dtype(q_dtype)).min, dtype=q_dtype))
        y = ctx.op.Attention(q4, present_k, present_v, ctx.op.Pad(bias, pads, lowest), scale=float(scale), **capped)
    _typed(y, q_dtype), _typed(present_k, cache_dtype), _typed(present_v, cache_dtype)
    return ctx.op.Transpose(y, perm=perm), present_k, present_v


def library_cache(ctx: Any, kind: str, past_k: ir.Value, past_v: ir.Value, past: ir.Value,
                  grows: bool) -> tuple[ir.Value, ir.Value, str]:
    """A library's cache buffer ``(batch, kv_heads, T, head_size)``, written at ``past`` (``[1]``
    int64), as :func:`emit_attention`'s past and layout. ``grows``: ``T = past + seq`` (the growing
    layout hands the library its past plus room for the step's tokens): ``Attention`` then reads
    the past alone and appends (``past_key``/``past_value`` → ``present``); GQA and a static buffer
    take the buffer as it is, written at ``past``."""
    if kind == "attention" and grows:
        zero, axis = ctx.i64([0]), ctx.i64([2])
        return ctx.op.Slice(past_k, zero, past, axis), ctx.op.Slice(past_v, zero, past, axis), "concat"
    return past_k, past_v, "shared"

"""The attention layers of transformers' Flax GPT-Neo, GPT-J, OPT, Bloom and XGLM as one fused op.

As ``attention.py`` does for GPT-2/Llama/Mistral/Gemma (whose gate, ``_cached_self_attention``,
and binding, ``jax2onnx_apply``, this module shares): inside an export, each cached
self-attention call of these classes becomes a marked region whose body is the library's own
``__call__`` (on an unbound clone, the region's operands as its variables), the new cache written
back to the module's ``cache`` collection. The lowering emits, from the region's weights, the
projections, the layer's own rotation, and one ``GroupQueryAttention`` (``target="onnxruntime"``)
or opset-23 ``Attention`` (standard ONNX) through ``fused.emit_attention``. What each family adds:

- GPT-Neo (``FlaxGPTNeoSelfAttention``): unscaled scores (the library multiplies q by
  ``sqrt(head_size)`` before the usual ``1/sqrt(head_size)``: scale 1); its local layers see the
  ``window_size`` keys up to the query (slots ``q - window < k <= q``, as the library's mask), expressed
  in the additive bias the fused op reads (opset-23 ``Attention`` has no window of its own, and one
  bias serves both targets);
- GPT-J (``FlaxGPTJAttention``): the rotation of the first ``rotary_dim`` dims of each head, in
  the interleaved (``rotate_every_two``) convention, from the layer's own sin/cos table: a
  ``RotaryEmbedding`` (``interleaved=1``, ``rotary_embedding_dim``) on q and k before the
  attention; a layer without ``rotary_dim`` runs the library's code;
- Bloom (``FlaxBloomAttention``): the fused ``query_key_value`` (per head ``[q | k | v]``), ALiBi
  added to the bias per head (the library's own ``alibi`` argument, built from the mask), and the
  residual the layer adds to its output;
- OPT, XGLM (``FlaxOPTAttention``, ``FlaxXGLMAttention``): biased q/k/v/out projections, scale
  ``1/sqrt(head_size)``.

A declined region (another target, an opset below 23) lowers its body: the library's math.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx_ir as ir
from jax2onnx.fusion import Operands, matmul_bias
from jax2onnx.plugin import Lowerings

from ...fused import _typed, additive_bias, fused_kind
from ...region_patch import region_patch
from .attention import _cached_self_attention, attend_over_library_cache, cached_attention_region, hf_patch

HF_MORE_ATTENTION_MARK = "jax2onnx_llm.frontends.hf_flax.attention_more"

lowerings = Lowerings()

#: the family's projections: (q, k, v or the fused qkv, output)
_PROJECTIONS = {
    "gptneo": ("q_proj", "k_proj", "v_proj", "out_proj"),
    "gptj": ("q_proj", "k_proj", "v_proj", "out_proj"),
    "opt": ("q_proj", "k_proj", "v_proj", "out_proj"),
    "xglm": ("q_proj", "k_proj", "v_proj", "out_proj"),
    "bloom": ("query_key_value", None, None, "dense"),
}
#: the family's layer returns (output, attention weights) rather than (output,)
_RETURNS_WEIGHTS = ("opt", "xglm")
_CALL_ARGS = ("hidden_states", "attention_mask")


def _gptj_tables(module: Any, rotary_dim: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(cos, sin)`` ``(positions, rotary_dim // 2)`` from GPT-J's own table
    (``create_sinusoidal_positions``: ``[sin | cos]`` per position), or None for another form."""
    make = getattr(sys.modules.get(type(module).__module__), "create_sinusoidal_positions", None)
    if make is None or rotary_dim % 2:
        return None
    try:
        with jax.ensure_compile_time_eval():
            table = np.asarray(make(module.config.max_position_embeddings, rotary_dim), dtype=np.float32)
    except Exception:  # noqa: BLE001 - another form: the library's code runs
        return None
    if table.ndim != 2 or table.shape[1] != rotary_dim:
        return None
    half = rotary_dim // 2
    return np.ascontiguousarray(table[:, half:]), np.ascontiguousarray(table[:, :half])


def _region(module: Any, original: Callable[..., Any], named: dict[str, Any], family: str) -> Any:
    config = module.config
    hidden, mask = named["hidden_states"], named["attention_mask"]
    cache = module.variables["cache"]
    _, capacity, kv_heads, head_size = cache["cached_key"].shape
    num_heads = int(module.num_heads)
    seq = hidden.shape[1]
    scale = float(1.0 / np.sqrt(int(head_size)))
    static: dict[str, Any] = {}
    # The mask every fused op reads: real keys at or before each query, over the whole buffer.
    bias = additive_bias(mask, cache["cache_index"], seq, capacity, hidden.dtype)
    if family == "gptneo":
        scale = 1.0
        if module.attention_type == "local":
            query_pos = cache["cache_index"] + jnp.arange(seq, dtype=jnp.int32)
            outside = jnp.arange(capacity, dtype=jnp.int32)[None, :] <= query_pos[:, None] - int(config.window_size)
            bias = jnp.where(outside[None, None], jnp.finfo(hidden.dtype).min, bias)
    elif family == "gptj":
        rotary_dim = getattr(module, "rotary_dim", None)
        tables = _gptj_tables(module, int(rotary_dim)) if rotary_dim else None
        if tables is None:
            return None
        static["cos"], static["sin"] = tables
        static["rotary_dim"] = int(rotary_dim)
    elif family == "bloom":
        bias = bias + named["alibi"].astype(bias.dtype)  # (batch, heads, 1, capacity): per-head ALiBi
    # array arguments (GPT-J's positions, Bloom's residual and ALiBi) are operands; the rest static
    arrays = [k for k in named if k not in _CALL_ARGS and isinstance(named[k], jax.Array)]
    call_static = {k: v for k, v in named.items() if k not in _CALL_ARGS and k not in arrays}
    inputs: dict[str, Any] = {"x": hidden, "mask": mask, **{k: named[k] for k in arrays}, "bias": bias}
    out = cached_attention_region(
        module, original, HF_MORE_ATTENTION_MARK, inputs, tuple(arrays), call_static, family=family,
        num_heads=num_heads, kv_heads=int(kv_heads), head_size=int(head_size), scale=scale, **static,
    )
    return (out, None) if family in _RETURNS_WEIGHTS else (out,)


def _patch(target: str, family: str) -> Any:
    return hf_patch(f"transformers.models.{target}", region_patch(_cached_self_attention,
                                                                  partial(_region, family=family)))


patches = [
    _patch("gpt_neo.modeling_flax_gpt_neo:FlaxGPTNeoSelfAttention", "gptneo"),
    _patch("gptj.modeling_flax_gptj:FlaxGPTJAttention", "gptj"),
    _patch("opt.modeling_flax_opt:FlaxOPTAttention", "opt"),
    _patch("bloom.modeling_flax_bloom:FlaxBloomAttention", "bloom"),
    _patch("xglm.modeling_flax_xglm:FlaxXGLMAttention", "xglm"),
]


def _dense(ctx: Any, ops: Operands, x: ir.Value, name: str) -> ir.Value:
    return matmul_bias(ctx, x, ops[f"{name}/kernel"], ops.get(f"{name}/bias"), 3)


def _rotate(ctx: Any, kind: str, x: ir.Value, positions: ir.Value, heads: int, dtype: Any) -> ir.Value:
    """GPT-J's rotation of ``(batch, seq, heads * head_size)``: the first ``rotary_dim`` dims of each
    head, interleaved pairs."""
    p = ctx.marked.params
    cos, sin = ctx.const(p["cos"], np.float32), ctx.const(p["sin"], np.float32)
    if kind == "gqa":
        y = ctx.op.RotaryEmbedding(x, positions, cos, sin, num_heads=heads, interleaved=1,
                                   rotary_embedding_dim=p["rotary_dim"], _domain="com.microsoft")
    else:
        y = ctx.op.RotaryEmbedding(x, cos, sin, positions, num_heads=heads, interleaved=1,
                                   rotary_embedding_dim=p["rotary_dim"])
    return _typed(y, dtype)


@lowerings.register(f"call:{HF_MORE_ATTENTION_MARK}")
def lower_hf_more_attention(ctx: Any, *ins: ir.Value) -> Any:
    kind = fused_kind(ctx)
    if kind is None:
        return None
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    family, heads, kv_heads, head_size = p["family"], p["num_heads"], p["kv_heads"], p["head_size"]
    q_name, k_name, v_name, out_name = _PROJECTIONS[family]
    x = ops["x"]
    x_dtype = ops.aval("x").dtype
    if family == "bloom":  # per head [q | k | v]
        qkv = ctx.op.Reshape(_dense(ctx, ops, x, q_name), ctx.i64([0, 0, heads, 3 * head_size]))
        q, k, v = ctx.op.Split(qkv, ctx.i64([head_size] * 3), axis=3, _outputs=3)
    else:
        q, k, v = (_dense(ctx, ops, x, name) for name in (q_name, k_name, v_name))
        if family == "gptj":
            positions = ctx.cast(ops["position_ids"], np.int64)
            q = _rotate(ctx, kind, q, positions, heads, x_dtype)
            k = _rotate(ctx, kind, k, positions, kv_heads, x_dtype)
        q = ctx.op.Reshape(q, ctx.i64([0, 0, heads, head_size]))
        k = ctx.op.Reshape(k, ctx.i64([0, 0, kv_heads, head_size]))
        v = ctx.op.Reshape(v, ctx.i64([0, 0, kv_heads, head_size]))
    out, present_k, present_v, new_index = attend_over_library_cache(
        ctx, kind, ops, q, k, v, heads=heads, kv_heads=kv_heads, head_size=head_size, scale=p["scale"], rotary=None)
    out = _dense(ctx, ops, out, out_name)
    if family == "bloom":
        out = ctx.op.Add(out, ops["residual"])
    return out, present_k, present_v, new_index

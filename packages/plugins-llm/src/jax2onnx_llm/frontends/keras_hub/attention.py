"""KerasHub attention layers with a KV cache as one fused attention op (see the Hugging Face
front-end's ``attention.py`` for the pattern, which this module follows for Keras).

``LlamaAttention``, ``CachedGemmaAttention`` and GPT-2's ``CachedMultiHeadAttention``: a call with
``cache``/``cache_update_index`` (the KerasHub adapter, ``adapter.py``, makes every call
so) runs as a marked region whose body is the layer's own ``call`` on the layer's variables (a
``keras.StatelessScope``); its lowering emits the ``EinsumDense`` projections as MatMuls, rotates
q and k at ``cache_update_index + i`` as KerasHub does, and one GroupQueryAttention / opset-23
``Attention`` over KerasHub's cache buffer (``fused.emit_attention``). Gemma's post-rotary
reordering of the head features is a permutation of q and k alike, which the scores do not see
(the cache is the graph's own between steps). Layers configured beyond the lowering (logit soft
cap, sliding window, scaled RoPE, quantized or LoRA weights, training) run their own code.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import sys
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import jax.numpy as jnp
import numpy as np
import onnx_ir as ir
from jax2onnx.fusion import Operands, call_region, matmul_bias
from jax2onnx.plugin import Lowerings, ModulePatch, exporting

from ...attention_report import layer_index, tag
from ...fused import emit_attention, fused_kind, library_cache
from ...region_patch import region_patch
from ...spec import rope_frequencies
from .core_attention import library_core

lowerings = Lowerings()

KERAS_ATTENTION_MARK = "jax2onnx_llm.frontends.keras_hub.attention"


@dataclasses.dataclass(frozen=True)
class KerasHubPatch(ModulePatch):
    """A KerasHub layer's ``call``, overridden on the exported model's own layer instances
    (KerasHub's classes stay as they are), only when keras_hub is imported and Keras runs on JAX."""

    def resolve(self) -> Any | None:
        keras = sys.modules.get("keras")
        try:
            if keras is None or keras.backend.backend() != "jax":
                return None
        except Exception:  # noqa: BLE001 - a half-imported keras: nothing of it is being traced
            return None
        return super().resolve()


def _keras_rope(rope: Any) -> float | None:
    """The rotary layer's base when it is the plain half-split RoPE (no scaling), else None."""
    if rope is None:
        return None
    plain = (getattr(rope, "scaling_factor", getattr(rope, "position_scaling_factor", 1.0)) == 1.0
             and getattr(rope, "frequency_adjustment_factor", None) is None
             and getattr(rope, "sequence_axis", 1) == 1 and getattr(rope, "feature_axis", -1) == -1)
    return float(rope.max_wavelength) if plain else None


def _keras_plan(layer: Any, style: str) -> dict[str, Any] | None:
    """The static facts the lowering needs, or None when the layer is configured beyond it."""
    # (dropout is inactive here: the region is only built for calls with training off)
    if getattr(layer, "quantization_mode", None) or getattr(layer, "lora_enabled", False):
        return None
    try:
        if layer.compute_dtype != "float32" or layer.variable_dtype != "float32":
            return None
    except AttributeError:
        return None
    if style == "llama":
        theta = _keras_rope(getattr(layer, "rotary_embedding_layer", None))
        heads, kv_heads = layer.num_query_heads, layer.num_key_value_heads
        head_size = int(layer._query_dense.kernel.shape[-1])
        scale = float(layer._inv_norm_factor)
    elif style == "gemma":
        if layer.logit_soft_cap is not None or layer.use_sliding_window_attention:
            return None
        theta = _keras_rope(getattr(layer, "rope_layer", None))
        heads, kv_heads, head_size = layer.num_query_heads, layer.num_key_value_heads, int(layer.head_dim)
        scale = float(1 / np.sqrt(head_size if layer.query_head_dim_normalize else layer.hidden_dim // heads))
    else:  # keras MultiHeadAttention with a cache (GPT-2)
        theta = None
        heads = kv_heads = layer.num_heads
        head_size = int(layer.key_dim)
        if layer.value_dim != layer.key_dim or getattr(layer, "_attention_axes", (1,)) not in ((1,), [1], None):
            return None
        scale = float(1 / np.sqrt(head_size))
    if style != "mha" and theta is None:
        return None
    return {"num_heads": int(heads), "kv_heads": int(kv_heads), "head_size": head_size, "scale": scale,
            "theta": theta}


#: set inside :func:`library_attention`: the layers' calls stay the library's own code
_DECLINED: contextvars.ContextVar[bool] = contextvars.ContextVar("keras_hub_attention_declined", default=False)


@contextlib.contextmanager
def library_attention() -> Iterator[None]:
    """For the block, KerasHub attention layers are not fused: their masks go beyond what the fused
    ops express (GroupQueryAttention is causal; PaliGemma's prompt attends both ways, ``multimodal/``)."""
    token = _DECLINED.set(True)
    try:
        yield
    finally:
        _DECLINED.reset(token)


def _exporting(layer: Any, named: dict[str, Any]) -> bool:
    """Every call inside an export may fuse (outside :func:`library_attention`); :func:`_keras_region`
    declines what it does not cover."""
    return exporting() and not _DECLINED.get()


def _keras_region(layer: Any, original: Callable[..., Any], named: dict[str, Any], style: str) -> Any:
    import keras

    if style == "mha":  # self-attention only: query, value (and key) one array
        x, key = named["query"], named.get("key")
        if named["value"] is not x or (key is not None and key is not x) or named.get("return_attention_scores"):
            return None
    else:
        x = named["hidden_states" if style == "llama" else "x"]
    cache, index, mask = named.get("cache"), named.get("cache_update_index"), named.get("attention_mask")
    if cache is None or index is None or mask is None or getattr(mask, "ndim", 0) != 3 or named.get("training"):
        return None
    plan = _keras_plan(layer, style)
    if plan is None or np.dtype(x.dtype) != np.float32:
        return None
    variables = list(layer.variables)
    prefix = layer.path
    names = [v.path[len(prefix) + 1:] if v.path.startswith(prefix + "/") else v.path for v in variables]
    index = jnp.asarray(index, jnp.int32)
    bias = jnp.where(mask[:, None].astype(bool), jnp.zeros((), x.dtype), jnp.finfo(x.dtype).min)
    inputs = {"x": x, "mask": mask, "cache": cache, "index": index, "bias": bias}

    def run(leaves: list[Any], x: Any, mask: Any, cache: Any, index: Any, bias: Any) -> Any:
        # The layer's own call (unpatched) on these operands; bias is the lowering's, unused here.
        # (inside this region's body the layer's softmax core is plain library code, not a region of
        # its own: a nested region would make each trace of the body differ)
        with keras.StatelessScope(state_mapping=list(zip(variables, leaves))), library_core():
            if style == "mha":
                return original(layer, query=x, value=x, attention_mask=mask, cache=cache, cache_update_index=index)
            return original(layer, x, attention_mask=mask, cache=cache, cache_update_index=index)

    return call_region(KERAS_ATTENTION_MARK, run, inputs, [(n, v.value) for n, v in zip(names, variables)],
                       style=style, layer=layer_index(layer), **plan)


_KH = "keras_hub.src"
patches = [
    KerasHubPatch(f"{_KH}.models.llama.llama_attention:LlamaAttention", "call",
                  region_patch(_exporting, partial(_keras_region, style="llama"))),
    KerasHubPatch(f"{_KH}.models.gemma.gemma_attention:CachedGemmaAttention", "call",
                  region_patch(_exporting, partial(_keras_region, style="gemma"))),
    KerasHubPatch(f"{_KH}.layers.modeling.cached_multi_head_attention:CachedMultiHeadAttention", "call",
                  region_patch(_exporting, partial(_keras_region, style="mha"))),
]


def _keras_dense(ctx: Any, ops: Operands, x: ir.Value, name: str, heads_first: bool) -> ir.Value:
    """An input projection ``EinsumDense`` as a MatMul to ``(batch, seq, heads * head_size)``:
    kernel ``(hidden, heads, head)`` or, ``heads_first`` (Gemma), ``(heads, hidden, head)``."""
    kernel = ops[f"{name}/kernel"]
    shape = ops.shape(f"{name}/kernel")
    if heads_first:
        kernel = ctx.op.Transpose(kernel, perm=[1, 0, 2])
        shape = (shape[1], shape[0], shape[2])
    kernel = ctx.op.Reshape(kernel, ctx.i64([int(shape[0]), int(shape[1]) * int(shape[2])]))
    bias = ops.get(f"{name}/bias")
    if bias is not None:
        bias = ctx.op.Reshape(bias, ctx.i64([-1]))
    return matmul_bias(ctx, x, kernel, bias, 3)


def _rope_rows(ctx: Any, total: ir.Value, head_size: int, theta: float) -> tuple[ir.Value, ir.Value]:
    """cos/sin tables for positions ``0 .. total - 1``, computed in the graph (``total`` rows: every
    position this step can reach), as KerasHub's rotary layer computes its angles."""
    freqs = ctx.const(np.asarray(rope_frequencies(head_size, theta), np.float32)[None, :])
    limit = ctx.cast(ctx.op.Squeeze(total, ctx.i64([0])), np.float32)
    rows = ctx.op.Range(ctx.const(np.asarray(0.0, np.float32)), limit, ctx.const(np.asarray(1.0, np.float32)))
    angles = ctx.op.Mul(ctx.op.Unsqueeze(rows, ctx.i64([1])), freqs)
    return ctx.op.Cos(angles), ctx.op.Sin(angles)


@lowerings.register(f"call:{KERAS_ATTENTION_MARK}")
def lower_keras_attention(ctx: Any, *ins: ir.Value) -> Any:
    kind = fused_kind(ctx)
    if kind is None:
        return None
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    style, heads, kv_heads, head_size = p["style"], p["num_heads"], p["kv_heads"], p["head_size"]
    # the projections' names: those of all three layers here, or the ALiBi layers' (alibi_attention.py)
    names = p.get("projections") or ("query", "key", "value", "attention_output")
    x = ops["x"]
    q, k, v = (_keras_dense(ctx, ops, x, n, style == "gemma") for n in names[:3])
    q = ctx.op.Reshape(q, ctx.i64([0, 0, heads, head_size]))
    k = ctx.op.Reshape(k, ctx.i64([0, 0, kv_heads, head_size]))
    v = ctx.op.Reshape(v, ctx.i64([0, 0, kv_heads, head_size]))
    # KerasHub's (batch, 2, length, kv_heads, head) cache, each half as (batch, kv_heads, length, head)
    perm = [0, 2, 1, 3]
    cache = ops["cache"]
    past_k = ctx.op.Transpose(ctx.op.Gather(cache, ctx.i64(0), axis=1), perm=perm)
    past_v = ctx.op.Transpose(ctx.op.Gather(cache, ctx.i64(1), axis=1), perm=perm)
    index64 = ctx.op.Unsqueeze(ctx.cast(ops["index"], np.int64), ctx.i64([0]))
    seq = ctx.op.Shape(x, start=1, end=2)
    total = ctx.op.Add(index64, seq)
    rotary = None
    if p["theta"] is not None:
        # KerasHub rotates the step's tokens at past + i in every row
        steps = ctx.op.Range(ctx.op.Squeeze(index64, ctx.i64([0])), ctx.op.Squeeze(total, ctx.i64([0])), ctx.i64(1))
        positions = ctx.op.Expand(ctx.op.Unsqueeze(steps, ctx.i64([0])), ctx.op.Shape(x, start=0, end=2))
        cos, sin = _rope_rows(ctx, total, head_size, p["theta"])
        rotary = (positions, cos, sin)
    x_dtype, cache_dtype = ops.aval("x").dtype, ops.aval("cache").dtype
    grows = not isinstance(ops.shape("cache")[2], (int, np.integer))  # past + room (cache="concat")
    past_k, past_v, layout = library_cache(ctx, kind, past_k, past_v, index64, grows)
    out, present_k, present_v = emit_attention(
        ctx, kind, q, k, v, past_k, past_v, ops["bias"], total, layout=layout, num_heads=heads, kv_heads=kv_heads,
        head_size=head_size, scale=p["scale"], rotary=rotary, dtypes=(x_dtype, cache_dtype), bias_columns="buffer",
    )
    tag(out, p["layer"])
    out = ctx.op.Reshape(out, ctx.i64([0, 0, heads * head_size]))
    o_kernel = ctx.op.Reshape(ops[f"{names[3]}/kernel"], ctx.i64([heads * head_size, -1]))
    out = matmul_bias(ctx, out, o_kernel, ops.get(f"{names[3]}/bias"), 3)
    halves = [ctx.op.Unsqueeze(ctx.op.Transpose(t, perm=perm), ctx.i64([1])) for t in (present_k, present_v)]
    new_cache = ctx.op.Concat(*halves, axis=1)
    return out, new_cache

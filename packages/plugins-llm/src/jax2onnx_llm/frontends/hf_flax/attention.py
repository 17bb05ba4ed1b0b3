"""Hugging Face Flax attention layers with a KV cache as one fused attention op.

The transformers adapter (``adapter.py``) runs the library's own modules, so
their attention is the library's code: projections, rotary, ``_concatenate_to_cache`` (a
``dynamic_update_slice`` into ``cached_key``/``cached_value`` at ``cache_index``), masks,
softmax. Inside an export this module's patches run each cached self-attention call
(``FlaxLlamaAttention``, ``FlaxMistralAttention``, ``FlaxGemmaAttention``, ``FlaxGPT2Attention``)
as a marked region whose body is the library's own ``__call__`` (applied to an unbound clone of
the module on the region's operands, as the Linen pack's fusions do), and the new cache the body
computes is written back to the module's ``cache`` collection. The lowering reads the export's
target (``fused.fused_kind``) and emits, from the region's weights:

- the Q/K/V and output projections (MatMul, + bias where the layer has one);
- the rotation (Llama, Mistral, Gemma) from the layer's own sin/cos table, by the fused op of
  ``fused.emit_attention`` (inside GroupQueryAttention, or a RotaryEmbedding);
- one GroupQueryAttention (``target="onnxruntime"``) or opset-23 ``Attention`` (standard ONNX)
  over the library's cache buffer, which both cache layouts hand in as a buffer written at
  ``cache_index`` (the shared layout's static buffer; the growing layout's past plus room for the
  step's tokens), so the emitted op writes where the library writes.

Anything the lowering does not cover (``init_cache``, ``output_attentions``, dropout, a sliding
window shorter than the positions, a rotary table of another form) calls the library's code
unpatched (Mistral's ``sliding_window=None`` included: a window of 0 in its
mask), and a declined region (another target, an opset below 23) lowers the body: the
library's math either way.

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
from jax2onnx.fusion import Operands, call_region, linen_calls, matmul_bias, path_name
from jax2onnx.plugin import Lowerings, ModulePatch, exporting

from ...fused import additive_bias, emit_attention, fused_kind, library_cache
from ...region_patch import region_patch

HF_ATTENTION_MARK = "jax2onnx_llm.frontends.hf_flax.attention"

lowerings = Lowerings()


def hf_patch(target: str, replacement: Callable[[Any], Any]) -> ModulePatch:
    """``target.__call__`` of a transformers Flax attention class, for the calls of this export
    (found only once the program imported transformers: an export must not import it, seconds,
    to find out that nothing of it is being traced)."""
    return ModulePatch(target, "__call__", replacement, interceptor=linen_calls)


def _static_true(x: Any) -> bool:
    return isinstance(x, (bool, np.bool_)) and bool(x)


def _static_false(x: Any) -> bool:
    return isinstance(x, (bool, np.bool_)) and not bool(x)


def _cached_self_attention(module: Any, args: dict[str, Any]) -> bool:
    """The call is a cached decoding step the lowering covers: the cache exists and is being
    written, no attention weights or dropout asked for, a ``(batch, length)`` mask."""
    if not exporting():
        return False
    try:
        if module.is_initializing() or not module.has_variable("cache", "cached_key"):
            return False
        if not module.is_mutable_collection("cache") or not getattr(module, "causal", True) \
                or getattr(module, "is_cross_attention", False):
            return False
    except Exception:  # noqa: BLE001 - an unusual binding: the library's own code handles it
        return False
    mask = args.get("attention_mask")
    return (
        _static_false(args.get("init_cache", False))
        and _static_false(args.get("output_attentions", False))
        and _static_true(args.get("deterministic", True))
        and args.get("key_value_states") is None
        and mask is not None
        and getattr(mask, "ndim", 0) == 2
        and jnp.issubdtype(args["hidden_states"].dtype, jnp.floating)
        # float32 only: a model computing in half precision (dtype=bfloat16/float16; its RMS norm may
        # still hand the layer float32) runs the library's attention
        and jnp.dtype(getattr(module, "dtype", jnp.float32)) == jnp.float32
    )


def _rope_tables(module: Any, head_size: int) -> tuple[np.ndarray, np.ndarray] | None:
    """``(cos, sin)`` ``(positions, head_size // 2)`` from the layer's own rotary table
    (``sincos[p] = [sin(f) | sin(f) | cos(f) | cos(f)]``, the half-split convention), or None when
    the table has another form (the check below: its shape and the repeated halves)."""
    # The table the layer's rotary module builds in its setup (``create_sinusoidal_positions`` of
    # the layer's own modeling module), evaluated now: read from the bound module it is a traced
    # constant of the export's trace.
    make = getattr(sys.modules.get(type(module).__module__), "create_sinusoidal_positions", None)
    if make is None:
        return None
    try:
        with jax.ensure_compile_time_eval():
            table = np.asarray(make(module.config.max_position_embeddings, head_size), dtype=np.float32)
    except Exception:  # noqa: BLE001 - another form: the library's code runs
        return None
    half = head_size // 2
    if table.ndim != 3 or table.shape[1] != 1 or table.shape[2] != 2 * head_size:
        return None
    sin, cos = table[:, 0, :head_size], table[:, 0, head_size:]
    if not (np.array_equal(sin[:, :half], sin[:, half:]) and np.array_equal(cos[:, :half], cos[:, half:])):
        return None
    return np.ascontiguousarray(cos[:, :half]), np.ascontiguousarray(sin[:, :half])


def _hf_region(module: Any, original: Callable[..., Any], named: dict[str, Any], style: str) -> Any:
    config = module.config
    hidden, mask = named["hidden_states"], named["attention_mask"]
    cache = module.variables["cache"]
    cached_key = cache["cached_key"]
    _, capacity, kv_heads, head_size = cached_key.shape
    num_heads = int(module.num_heads)
    static: dict[str, Any] = {}
    inputs: dict[str, Any] = {"x": hidden, "mask": mask}
    if style == "rope":
        # Mistral's local attention: the library masks with ``triu(causal, -(sliding_window or 0))``,
        # so a window of None is a window of 0 there (each token sees itself alone), not "no window".
        if hasattr(config, "sliding_window") and (config.sliding_window or 0) < config.max_position_embeddings:
            return None
        tables = _rope_tables(module, int(head_size))
        if tables is None:
            return None
        static["cos"], static["sin"] = tables
        inputs["positions"] = named["position_ids"]
    # The mask every fused op reads: real keys at or before each query, over the whole buffer
    # (slots past cache_index + sequence fall out through causality).
    seq = hidden.shape[1]
    inputs["bias"] = additive_bias(mask, cache["cache_index"], seq, capacity, hidden.dtype)
    keys = tuple(k for k in named if k not in ("hidden_states", "attention_mask", "position_ids"))
    out = cached_attention_region(
        module, original, HF_ATTENTION_MARK, inputs, ("position_ids",) if style == "rope" else (),
        {k: named[k] for k in keys}, style=style, num_heads=num_heads, kv_heads=int(kv_heads),
        head_size=int(head_size), scale=float(1.0 / np.sqrt(int(head_size))), **static,
    )
    return (out,)


def cached_attention_region(module: Any, original: Callable[..., Any], mark: str, inputs: dict[str, Any],
                            keywords: tuple[str, ...], call_static: dict[str, Any], **static: Any) -> Any:
    """A Hugging Face Flax attention layer's call as the marked region ``mark``, its cache written
    back: the region's body is the library's own ``__call__`` (``original``) on its operands.

    ``inputs``: ``x`` (hidden states), ``mask``, then the arrays the library call takes as the
    keyword arguments ``keywords`` (in that order), then the lowering's own operands (the bias),
    which the body does not read; ``call_static``: the call's other arguments; ``static``: what
    the lowering reads from ``ctx.marked.params`` (``n_params``, the layer's parameter count, is added).
    Returns the layer's output."""
    cache = module.variables["cache"]
    params = [(path_name(p), v) for p, v in jax.tree_util.tree_flatten_with_path(module.variables["params"])[0]]
    cache_names = ("cached_key", "cached_value", "cache_index")
    weights = params + [(name, cache[name]) for name in cache_names]
    n_params = len(params)
    params_def = jax.tree_util.tree_structure(module.variables["params"])
    unbound = module.clone(parent=None)

    def run(leaves: list[Any], x: Any, attention_mask: Any, *rest: Any) -> Any:
        variables = {"params": jax.tree_util.tree_unflatten(params_def, leaves[:n_params]),
                     "cache": dict(zip(cache_names, leaves[n_params:]))}
        extra = dict(zip(keywords, rest))  # the trailing lowering operands have no keyword

        def apply(m: Any) -> Any:
            return original(m, hidden_states=x, attention_mask=attention_mask, **extra, **call_static)

        outputs, mutated = jax2onnx_apply(apply, unbound, variables)
        new = mutated["cache"]
        return outputs[0], new["cached_key"], new["cached_value"], new["cache_index"]

    out, new_k, new_v, new_index = call_region(mark, run, inputs, weights, n_params=n_params, **static)
    module.put_variable("cache", "cached_key", new_k)
    module.put_variable("cache", "cached_value", new_v)
    module.put_variable("cache", "cache_index", new_index)
    return out


def jax2onnx_apply(fn: Callable[[Any], Any], unbound: Any, variables: dict[str, Any]) -> tuple[Any, Any]:
    """``fn(module)`` with ``unbound`` bound to ``variables``, the ``cache`` collection mutable."""
    from flax import linen as nn

    return nn.apply(fn, unbound, mutable=["cache"])(variables)


_MODELS = "transformers.models"
_ROPE = region_patch(_cached_self_attention, partial(_hf_region, style="rope"))
_GPT2 = region_patch(_cached_self_attention, partial(_hf_region, style="gpt2"))
patches = [
    hf_patch(f"{_MODELS}.llama.modeling_flax_llama:FlaxLlamaAttention", _ROPE),
    hf_patch(f"{_MODELS}.mistral.modeling_flax_mistral:FlaxMistralAttention", _ROPE),
    hf_patch(f"{_MODELS}.gemma.modeling_flax_gemma:FlaxGemmaAttention", _ROPE),
    hf_patch(f"{_MODELS}.gpt2.modeling_flax_gpt2:FlaxGPT2Attention", _GPT2),
]


def _dense(ctx: Any, ops: Operands, x: ir.Value, name: str) -> ir.Value:
    """A ``nn.Dense`` (kernel ``(in, out)``) or GPT-2's ``FlaxConv1D`` (kernel ``(out, in)``)."""
    kernel = ops[f"{name}/kernel"]
    if ctx.marked.params["style"] == "gpt2":
        kernel = ctx.op.Transpose(kernel, perm=[1, 0])  # folded: a constant
    return matmul_bias(ctx, x, kernel, ops.get(f"{name}/bias"), 3)


@lowerings.register(f"call:{HF_ATTENTION_MARK}")
def lower_hf_attention(ctx: Any, *ins: ir.Value) -> Any:
    kind = fused_kind(ctx)
    if kind is None:
        return None
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    heads, kv_heads, head_size = p["num_heads"], p["kv_heads"], p["head_size"]
    x = ops["x"]
    if p["style"] == "gpt2":
        q, k, v = ctx.op.Split(_dense(ctx, ops, x, "c_attn"), ctx.i64([heads * head_size] * 3), axis=2, _outputs=3)
    else:
        q, k, v = (_dense(ctx, ops, x, name) for name in ("q_proj", "k_proj", "v_proj"))
    q = ctx.op.Reshape(q, ctx.i64([0, 0, heads, head_size]))
    k = ctx.op.Reshape(k, ctx.i64([0, 0, kv_heads, head_size]))
    v = ctx.op.Reshape(v, ctx.i64([0, 0, kv_heads, head_size]))
    rotary = (ops["positions"], p["cos"], p["sin"]) if "positions" in ops else None
    out, present_k, present_v, new_index = attend_over_library_cache(
        ctx, kind, ops, q, k, v, heads=heads, kv_heads=kv_heads, head_size=head_size, scale=p["scale"], rotary=rotary)
    out = _dense(ctx, ops, out, "c_proj" if p["style"] == "gpt2" else "o_proj")
    return out, present_k, present_v, new_index


def attend_over_library_cache(ctx: Any, kind: str, ops: Operands, q: ir.Value, k: ir.Value, v: ir.Value, *,
                              heads: int, kv_heads: int, head_size: int, scale: float,
                              rotary: Any) -> tuple[ir.Value, ir.Value, ir.Value, ir.Value]:
    """The fused op over a Hugging Face Flax layer's own cache operands (``cached_key``/``cached_value``
    ``(batch, length, kv_heads, head)``, ``cache_index``) for projected ``q``/``k``/``v``
    ``(batch, seq, heads, head)`` and the additive mask operand ``bias``: the attention output
    ``(batch, seq, heads * head)`` before the output projection, the written caches in the library's
    layout, and the cache index moved past this call."""
    perm = [0, 2, 1, 3]  # the library's (batch, length, kv_heads, head) cache as (batch, kv_heads, length, head)
    past_k, past_v = ctx.op.Transpose(ops["cached_key"], perm=perm), ctx.op.Transpose(ops["cached_value"], perm=perm)
    index = ops["cache_index"]
    seq = ctx.op.Shape(ops["x"], start=1, end=2)
    past = ctx.op.Unsqueeze(ctx.cast(index, np.int64), ctx.i64([0]))
    total = ctx.op.Add(past, seq)
    x_dtype, cache_dtype = ops.aval("x").dtype, ops.aval("cached_key").dtype
    grows = not isinstance(ops.shape("cached_key")[1], (int, np.integer))  # past + room (cache="concat")
    past_k, past_v, layout = library_cache(ctx, kind, past_k, past_v, past, grows)
    out, present_k, present_v = emit_attention(
        ctx, kind, q, k, v, past_k, past_v, ops["bias"], total, layout=layout, num_heads=heads, kv_heads=kv_heads,
        head_size=head_size, scale=scale, rotary=rotary, dtypes=(x_dtype, cache_dtype), bias_columns="buffer",
    )
    out = ctx.op.Reshape(out, ctx.i64([0, 0, heads * head_size]))
    new_index = ctx.op.Add(index, ctx.cast(ctx.op.Squeeze(seq, ctx.i64([0])), ops.aval("cache_index").dtype))
    return out, ctx.op.Transpose(present_k, perm=perm), ctx.op.Transpose(present_v, perm=perm), new_index

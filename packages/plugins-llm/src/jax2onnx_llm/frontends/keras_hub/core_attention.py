"""The softmax core every KerasHub attention layer shares, ``_compute_attention``, as one fused op.

KerasHub's attention layers differ in their projections, norms and rotary variants (Llama 3's
frequency adjustment, Phi-3's long rope, Qwen 3's q/k norms, GPT-NeoX's partial rotary, SmolLM3's
no-rope layers), but all of them end the same way: after writing this step's keys and values into
the cache at ``cache_update_index``, they call ``self._compute_attention(query, key, value,
attention_mask, ...)`` with the rotated queries ``(batch, seq, heads, head)``, the whole cache
buffer ``(batch, T, heads or kv_heads, head)`` and the mask ``(batch, seq, T)``. That call is what
is fused here, so a family built from those layers fuses without code of its own; everything before
it stays the library's own code (the rotation "beside" the fused op).

For the running export the family adapter overrides ``_compute_attention`` on the exported model's
own attention layers (an instance attribute, removed after; :func:`core_attention`). The override
builds a marked region whose body is the library's own ``_compute_attention`` (so a declined region
computes exactly what KerasHub does) and whose lowering emits:

- ``target="onnxruntime"``: ``com.microsoft.GroupQueryAttention`` over the buffer (the step's keys
  sliced back out of it at ``cache_update_index``; writing them again is a no-op), the mask as its
  ``attention_bias``;
- ``target="onnx"`` (opset >= 23): ``Attention`` over the whole buffer with the mask as its bias.

Keys repeated to the query heads before the call (``ops.repeat(key, groups, axis=2)``, most
families) are taken back to the key-value heads by a strided slice, so the fused op groups them.

What may fuse is decided per layer (:func:`core_plan`), each refusal with its reason for the
export's report (``attention_report.py``): a logit soft cap is the ops' ``softcap``; attention
sinks are GroupQueryAttention's ``head_sink`` (standard ``Attention`` has none: declined there);
layers computing in another dtype than float32, quantized or with LoRA run their own code.
Sliding windows applied inside the call (Gemma 3, Qwen) are the layer's own
``_mask_sliding_window``, a window the core computes itself (GPT-OSS) is rebuilt from the layer's
``sliding_window``; both go into the fused op's mask. Before a layer fuses, a probe runs its
``_compute_attention`` on small random inputs (a padded row, the step at a nonzero index, 64 keys)
and compares it with what the fused op computes, picking the scale and windows it agrees with
(:func:`_verified`), so a layer whose core does something else (a bias the plan does not know) is
declined, not exported wrong. It runs over the export's whole context (``max_length`` keys, at
least 64, at most 16384), so a window it does not see changes no token the folder can generate. Inside a
whole-layer region's body (``attention.py``) the core stays library code.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import itertools
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx_ir as ir
from jax2onnx.plugin import Lowerings, marked_call

from ...attention_report import decline, layer_index, tag
from ...fused import fused_kind

lowerings = Lowerings()

KERAS_CORE_MARK = "jax2onnx_llm.frontends.keras_hub.core_attention"
#: the probe's key length: at least this, and the export's context length up to MAX_PROBE_KEYS, so a
#: window the core applies unannounced is seen wherever it could change a token of the folder
PROBE_KEYS = 64
MAX_PROBE_KEYS = 16384


@dataclasses.dataclass(frozen=True)
class CorePlan:
    scale: float
    #: the core narrows the mask with the layer's own ``_mask_sliding_window(mask, cache_update_index=...)``
    #: (a candidate from ``use_sliding_window_attention``, kept only where the probe shows it)
    windowed: bool
    #: ``cap * tanh(scores / cap)`` before the mask (Gemma's attention logit soft cap)
    softcap: float | None
    #: a per-head logit that joins each softmax and is dropped after (GPT-OSS's attention sinks)
    sinks: Any
    #: a window the core applies itself to the keys (key slot >= query slot - window; GPT-OSS):
    #: a candidate read from ``sliding_window``, kept only when the probe shows the core applies it
    window: int | None = None


def core_plan(layer: Any) -> CorePlan | str:
    """What the fused op needs of ``layer``, or the reason it cannot express the layer."""
    if not callable(getattr(layer, "_compute_attention", None)):
        return "no separable attention core (_compute_attention)"
    if getattr(layer, "quantization_mode", None) or getattr(layer, "lora_enabled", False):
        return "quantized or LoRA attention weights"
    if getattr(layer, "compute_dtype", "float32") != "float32":
        return f"attention computed in {layer.compute_dtype} (fused only in float32)"
    windowed = bool(getattr(layer, "use_sliding_window_attention", False))
    if windowed and not callable(getattr(layer, "_mask_sliding_window", None)):
        return "a sliding window without _mask_sliding_window"
    softcap = getattr(layer, "logit_soft_cap", None)
    # the scale: the layer's own, or the probe's pick among the conventional ones (_verified)
    scale = getattr(layer, "_inv_norm_factor", None)
    return CorePlan(scale=float(scale) if scale is not None else 0.0, windowed=windowed,
                    softcap=float(softcap) if softcap else None, sinks=getattr(layer, "sinks", None))


def _scale_candidates(layer: Any, plan: CorePlan, head_size: int, heads: int) -> list[float]:
    """The layer's ``_inv_norm_factor``, else the scales KerasHub's cores use: Gemma's
    ``query_head_dim_normalize`` choice, ``1/sqrt(head size)``, and 1 (q/k-normed Gemma 4)."""
    if plan.scale:
        return [plan.scale]
    found = []
    if hasattr(layer, "query_head_dim_normalize") and hasattr(layer, "hidden_dim"):
        found.append(1 / np.sqrt(head_size if layer.query_head_dim_normalize else layer.hidden_dim // heads))
    found += [1 / np.sqrt(head_size), 1.0]
    return [float(x) for x in dict.fromkeys(found)]


def _window_candidate(layer: Any) -> int | None:
    window = getattr(layer, "sliding_window", None)
    return int(window) if isinstance(window, (int, np.integer)) and not isinstance(window, bool) and window > 0 \
        else None


def _fused_mask(layer: Any, plan: CorePlan, mask: Any, index: Any) -> Any:
    """The mask the fused op applies: the layer's mask, narrowed by the windows its core applies."""
    if plan.windowed:
        mask = layer._mask_sliding_window(mask, cache_update_index=index)
    if plan.window is not None:
        seq, total = mask.shape[1], mask.shape[2]
        queries = index + jnp.arange(seq)[:, None]
        mask = jnp.logical_and(jnp.asarray(mask).astype(bool), jnp.arange(total)[None, :] >= queries - plan.window)
    return mask


#: set while a whole-layer region's body runs (``attention.py``): the core stays library code
_IN_LAYER_REGION: contextvars.ContextVar[bool] = contextvars.ContextVar("jax2onnx_llm_in_layer_region",
                                                                       default=False)


@contextlib.contextmanager
def library_core() -> Iterator[None]:
    """The attention cores called in this block run as the library's code, not as regions."""
    token = _IN_LAYER_REGION.set(True)
    try:
        yield
    finally:
        _IN_LAYER_REGION.reset(token)


def _kv_heads(layer: Any) -> int | None:
    for attr in ("num_key_value_heads", "_num_key_value_heads", "num_kv_heads"):
        value = getattr(layer, attr, None)
        if isinstance(value, (int, np.integer)):
            return int(value)
    return None


def core_attention(layer: Any, original: Callable[..., Any], index: Any,
                   context: int | None = None) -> Callable[..., Any]:
    """The stand-in for ``layer._compute_attention`` (``original``: the layer's bound method) during
    the export: a fused region where the layer may fuse, else ``original`` as called. ``index``: the
    step's ``cache_update_index`` (where this step's keys are in the buffer); ``context``: the
    export's ``max_length`` (the probe's key length, within ``PROBE_KEYS .. MAX_PROBE_KEYS``)."""
    probe_keys = min(max(PROBE_KEYS, int(context or 0)), MAX_PROBE_KEYS)
    signature = inspect.signature(original)
    names = list(signature.parameters)
    layer_at = layer_index(layer)
    plan = core_plan(layer)
    verdicts: dict[tuple[Any, ...], CorePlan | str] = {}  # the probed plan (or reason) per operand shapes

    def call(*args: Any, **kwargs: Any) -> Any:
        if _IN_LAYER_REGION.get():  # the body of a whole-layer region, which is what fuses
            return original(*args, **kwargs)
        if isinstance(plan, str):
            decline(layer_at, plan)
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        q, k, v = (bound.arguments.get(n) for n in names[:3])
        mask = bound.arguments.get(names[3]) if len(names) > 3 else None
        if mask is None or getattr(mask, "ndim", 0) != 3 or getattr(q, "ndim", 0) != 4:
            decline(layer_at, "called without a (batch, query, key) mask")
            return original(*args, **kwargs)
        if any(np.dtype(t.dtype) != np.float32 for t in (q, k, v)):
            decline(layer_at, "attention inputs not float32")
            return original(*args, **kwargs)
        heads, kv_in = int(q.shape[2]), int(k.shape[2])
        # keys with the query heads' count: repeated from the layer's key-value heads, or plain
        # multi-head attention (a layer naming no key-value head count)
        declared = (_kv_heads(layer) or heads) if kv_in == heads else kv_in
        if heads % declared or kv_in not in (heads, declared):
            decline(layer_at, "key-value head count not known")
            return original(*args, **kwargs)
        kv_heads = declared
        stride = heads // kv_heads if kv_in == heads else 1  # keys repeated to the query heads: every stride-th
        # other array arguments (the layer's cache_update_index / start_index) travel as operands
        extra = [n for n in names[4:] if isinstance(bound.arguments.get(n), (jax.Array, jax.core.Tracer))]
        static = {n: bound.arguments[n] for n in names[4:] if n in bound.arguments and n not in extra}
        shapes = (tuple(q.shape[2:]), tuple(k.shape[2:]), str(mask.dtype))
        if shapes not in verdicts:
            verdicts[shapes] = _verified(layer, original, plan, heads, kv_heads, stride, int(q.shape[3]),
                                         mask.dtype, extra, static, total=probe_keys)
        verdict = verdicts[shapes]
        if isinstance(verdict, str):
            decline(layer_at, verdict)
            return original(*args, **kwargs)
        fused_mask = _fused_mask(layer, verdict, mask, jnp.asarray(index, jnp.int32))
        sinks = () if verdict.sinks is None else (jnp.asarray(getattr(verdict.sinks, "value", verdict.sinks), jnp.float32),)

        def body(q: Any, k: Any, v: Any, mask: Any, fused_mask: Any, index: Any, *rest: Any, **_: Any) -> Any:
            # the library's own core on the region's operands (fused_mask, index, sinks: the lowering's)
            return original(q, k, v, mask, **static, **dict(zip(extra, rest[len(sinks):])))

        return marked_call(
            KERAS_CORE_MARK, body, q, k, v, mask, fused_mask, jnp.asarray(index, jnp.int32), *sinks,
            *[bound.arguments[n] for n in extra], scale=verdict.scale, kv_heads=kv_heads, stride=stride,
            softcap=verdict.softcap, sinks=bool(sinks), layer=layer_at,
        )

    return call


def _verified(layer: Any, original: Callable[..., Any], plan: CorePlan, heads: int, kv_heads: int, stride: int,
              head_size: int, mask_dtype: Any, extra: list[str], static: dict[str, Any],
              total: int = PROBE_KEYS) -> CorePlan | str:
    """``plan`` with its scale (and the window the core applies itself, if any) for which the probe
    shows the layer's core computing exactly what the fused op does, else the reason it does not."""
    window = _window_candidate(layer)
    windows = [None] + ([window] if window is not None and window < total - 3 else [])
    # a layer flagged use_sliding_window_attention may window in its core (Gemma 3, Qwen) or have its
    # decoder block window the mask it is handed (Gemma 4): the probe tells
    narrowed = [True, False] if plan.windowed else [False]
    first = None
    for scale in _scale_candidates(layer, plan, head_size, heads):
        for w, own in itertools.product(windows, narrowed):
            candidate = dataclasses.replace(plan, scale=scale, window=w, windowed=own)
            reason = _probe(layer, original, candidate, heads, kv_heads, stride, head_size, mask_dtype, extra, static,
                            total)
            if reason is None:
                return candidate
            first = first or reason
    return first or "no probe ran"


def _probe(layer: Any, original: Callable[..., Any], plan: CorePlan, heads: int, kv_heads: int, stride: int,
           head_size: int, mask_dtype: Any, extra: list[str], static: dict[str, Any], total: int) -> str | None:
    """None when the layer's core equals the fused op's attention on random inputs (``total`` keys,
    the last 3 the step's), else the reason."""
    rng = np.random.default_rng(0)
    batch, seq = 2, 3
    index = total - seq
    q = rng.standard_normal((batch, seq, heads, head_size)).astype(np.float32)
    k = rng.standard_normal((batch, total, kv_heads, head_size)).astype(np.float32)
    v = rng.standard_normal((batch, total, kv_heads, head_size)).astype(np.float32)
    if stride > 1:  # as the layer hands them over: repeated to the query heads
        k, v = np.repeat(k, stride, axis=2), np.repeat(v, stride, axis=2)
    positions = index + np.arange(seq)
    visible = np.arange(total)[None, :] <= positions[:, None]
    mask = np.broadcast_to(visible, (batch, seq, total)).copy()
    mask[1, :, :5] = False  # a left-padded row
    mask = mask.astype(np.dtype(mask_dtype))
    try:
        with jax.ensure_compile_time_eval():
            extras = {n: jnp.asarray(index, jnp.int32) for n in extra}
            got = original(jnp.asarray(q), jnp.asarray(k), jnp.asarray(v), jnp.asarray(mask), **static, **extras)
            if not hasattr(got, "shape"):  # (outputs, scores) of Keras' MultiHeadAttention
                return "its _compute_attention returns more than the attention output"
            got = np.asarray(got)
            fused_mask = np.asarray(_fused_mask(layer, plan, jnp.asarray(mask), jnp.asarray(index, jnp.int32)))
            sinks = None if plan.sinks is None else np.asarray(getattr(plan.sinks, "value", plan.sinks), np.float32)
    except Exception as e:  # noqa: BLE001 - a core that does not run on plain arrays is not fused
        return f"its _compute_attention did not run on probe inputs ({type(e).__name__})"
    want = _reference(q, k[:, :, ::stride], v[:, :, ::stride], fused_mask.astype(bool), plan.scale, plan.softcap,
                      sinks)
    if got.shape != want.shape:
        return f"its _compute_attention returns {got.shape}, not (batch, query, heads, head)"
    if not np.allclose(got, want, rtol=1e-4, atol=1e-5):
        return ("its _compute_attention is not softmax(scale q.k + mask) v on a probe "
                f"(largest difference {float(np.max(np.abs(got - want))):.3g})")
    return None


def _reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, mask: np.ndarray, scale: float, softcap: float | None,
               sinks: np.ndarray | None) -> np.ndarray:
    """What GroupQueryAttention / Attention compute: grouped heads, soft cap, additive mask,
    softmax (with the sink logits in its denominator)."""
    groups = q.shape[2] // k.shape[2]
    k, v = np.repeat(k, groups, axis=2), np.repeat(v, groups, axis=2)
    scores = np.einsum("bqhd,bkhd->bhqk", q, k) * scale
    if softcap:
        scores = softcap * np.tanh(scores / softcap)
    scores = np.where(mask[:, None], scores, np.finfo(np.float32).min)
    top = scores.max(-1, keepdims=True)
    if sinks is not None:
        top = np.maximum(top, sinks[None, :, None, None])
    weights = np.exp(scores - top)
    total = weights.sum(-1, keepdims=True)
    if sinks is not None:
        total = total + np.exp(sinks[None, :, None, None] - top)
    return np.einsum("bhqk,bkhd->bqhd", weights / total, v).astype(np.float32)


@lowerings.register(f"call:{KERAS_CORE_MARK}")
def lower_keras_core(ctx: Any, q: ir.Value, k: ir.Value, v: ir.Value, mask: ir.Value, fused_mask: ir.Value,
                     index: ir.Value, *rest: ir.Value) -> Any:
    kind = fused_kind(ctx)
    if kind is None:
        return None
    p = ctx.marked.params
    sinks = rest[0] if p["sinks"] else None
    if sinks is not None and kind == "attention":
        decline(p["layer"], "attention sinks: opset-23 Attention has no sink input")
        return None
    q_aval = ctx.avals_in[0]
    _, _, heads, head_size = q_aval.shape
    heads, head_size, kv_heads, stride = int(heads), int(head_size), int(p["kv_heads"]), int(p["stride"])
    dtype = q_aval.dtype
    if stride > 1:  # the library's repeat of the key-value heads, undone
        big = ctx.i64([np.iinfo(np.int64).max])
        k = ctx.op.Slice(k, ctx.i64([0]), big, ctx.i64([2]), ctx.i64([stride]))
        v = ctx.op.Slice(v, ctx.i64([0]), big, ctx.i64([2]), ctx.i64([stride]))
    lowest = ctx.const(np.asarray(np.finfo(np.dtype(dtype)).min, dtype=dtype))
    zero = ctx.const(np.asarray(0, dtype=dtype))
    keep = fused_mask if ctx.avals_in[4].dtype == np.bool_ else ctx.op.Cast(fused_mask, to=ir.DataType.BOOL)
    bias = ctx.op.Unsqueeze(ctx.op.Where(keep, zero, lowest), ctx.i64([1]))  # (batch, 1, seq, T)
    perm = [0, 2, 1, 3]
    k4, v4 = ctx.op.Transpose(k, perm=perm), ctx.op.Transpose(v, perm=perm)  # (batch, kv_heads, T, head)
    if kind == "attention":
        y = ctx.op.Attention(ctx.op.Transpose(q, perm=perm), k4, v4, bias, scale=float(p["scale"]),
                             softcap=float(p["softcap"] or 0.0))
        tag(y, p["layer"])
        return ctx.op.Transpose(y, perm=perm)
    from ...fused import group_query_attention

    start = ctx.op.Unsqueeze(ctx.cast(index, np.int64), ctx.i64([0]))
    total = ctx.op.Add(start, ctx.op.Shape(q, start=1, end=2))
    # the step's keys/values, already written into the buffer by the layer: GQA writes them again
    k_new = ctx.op.Slice(k, start, total, ctx.i64([1]))
    v_new = ctx.op.Slice(v, start, total, ctx.i64([1]))
    out, _, _ = group_query_attention(
        ctx, q, k_new, v_new, k4, v4, bias, total, num_heads=heads, kv_heads=kv_heads, head_size=head_size,
        scale=float(p["scale"]), rotary=None, dtypes=(dtype, ctx.avals_in[1].dtype), bias_columns="buffer",
        softcap=float(p["softcap"] or 0.0), head_sink=sinks)
    tag(out, p["layer"])
    return out


def core_layers(decoder: Any) -> list[Any]:
    """The decoder layer's attention layers: its sublayers with a ``_compute_attention``."""
    return [layer for layer in decoder._flatten_layers(include_self=False, recursive=True)
            if callable(getattr(layer, "_compute_attention", None))]


def no_core_reason(decoder: Any) -> str:
    """Why a decoder layer without a ``_compute_attention`` sublayer runs its own attention."""
    layers = decoder._flatten_layers(include_self=True, recursive=True)
    alibi = any("alibi" in type(layer).__name__.lower()
                or "alibi" in inspect.signature(layer.call).parameters for layer in layers)
    if alibi:
        return ("ALiBi bias: added to the scores inside the layer's own call, with no separable softmax core "
                "and no call(hidden, [alibi,] attention_mask, cache, cache_update_index) the ALiBi fusion reads")
    return "no separable attention core (_compute_attention) in the layer"

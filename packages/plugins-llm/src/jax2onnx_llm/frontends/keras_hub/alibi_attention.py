"""KerasHub's ALiBi attention layers (Bloom's ``BloomAttention``, Falcon's ``FalconAttention``) as one fused op.

These layers have no separable softmax core (no ``_compute_attention``): the ALiBi bias joins the
scores inside their own ``call``. So the whole call becomes the region, as ``attention.py``
does for Llama and Gemma (whose lowering, ``lower_keras_attention``, this one shares): its body is
the layer's own ``call`` on the layer's variables, so a declined region (another target, an opset
below 23) computes exactly what KerasHub does; its lowering emits the ``EinsumDense`` projections
as MatMuls and one GroupQueryAttention (``target="onnxruntime"``, the bias its ``attention_bias``,
one per head) or opset-23 ``Attention`` (the bias its float ``attn_mask``) over the layer's cache.

The additive bias the fused op reads is ALiBi plus the mask, built outside the region by the
library's own code, so it is KerasHub's bias value for value and follows the cache's length in
every step (``T``, the buffer the keys span: the export's ``max_length``, or ``past + sequence`` for
the growing cache):

- an ``alibi`` argument of the call (Falcon: its decoder block builds it over the whole cache,
  ``slope_h * key_slot``, ``(batch, heads, 1, T)``);
- an ``AlibiBias`` sublayer that the call adds to its scores (Bloom: ``slope_h * (key_slot - T + 1)``):
  that sublayer's own call on zero scores ``(1, heads, 1, T)``, which is its bias exactly.

Bloom adds the bias to the scaled scores, Falcon before the scale (``(q.k + alibi) * scale``: the
bias scaled too). Which one a layer does is not read from its family: before a layer fuses, a probe
runs its ``call`` on random inputs (a left-padded row, the step at a nonzero cache index, the
export's whole context of keys) and compares the output and the written cache with what the fused
op computes, under either convention (:func:`_verified`); a layer whose call agrees with neither
(another bias, other projections) is declined, with the reason in the export's report, and runs its
own code. What a layer needs to fuse here: ``call(hidden, [alibi,] attention_mask, cache,
cache_update_index)`` returning ``(output, cache)``, a ``(batch, 2, T, heads, head)`` cache,
``query_dense``/``key_dense``/``value_dense`` ``EinsumDense`` projections ``(hidden, heads, head)``
and an ``output_dense`` projection, in float32, not quantized.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.fusion import call_region

from ...attention_report import decline, layer_index
from .attention import KERAS_ATTENTION_MARK
from .core_attention import MAX_PROBE_KEYS, PROBE_KEYS, library_core

#: the projections the lowering reads, by their variables' names under the layer (q, k, v, output)
PROJECTIONS = ("query_dense", "key_dense", "value_dense", "output_dense")
#: the call's arguments the region covers (besides the hidden states, its first)
_COVERED = ("alibi", "attention_mask", "cache", "cache_update_index")


@dataclasses.dataclass(frozen=True)
class AlibiPlan:
    heads: int
    head_size: int
    scale: float
    #: the ALiBi bias comes as the call's ``alibi`` argument (else from its ``AlibiBias`` sublayer)
    argument: bool
    #: the call adds the bias before scaling the scores (Falcon), so the fused op's bias is scaled
    scaled: bool = False


def _alibi_sublayer(layer: Any) -> Any:
    from keras_hub.layers import AlibiBias

    return next((sub for sub in layer._flatten_layers(include_self=False, recursive=False)
                 if isinstance(sub, AlibiBias)), None)


def alibi_layers(decoder: Any) -> list[Any]:
    """The decoder layer's cached attention layers that add an ALiBi bias: their call takes an
    ``alibi`` argument, or they own an ``AlibiBias`` sublayer."""
    found = []
    for layer in decoder._flatten_layers(include_self=False, recursive=True):
        params = inspect.signature(layer.call).parameters
        if "cache" in params and "cache_update_index" in params and (
                "alibi" in params or _alibi_sublayer(layer) is not None):
            found.append(layer)
    return found


def _weights(layer: Any) -> list[tuple[str, Any]]:
    """The layer's variables, named under the layer (``query_dense/kernel``, ...)."""
    prefix = layer.path
    return [(v.path[len(prefix) + 1:] if v.path.startswith(prefix + "/") else v.path, v) for v in layer.variables]


def alibi_plan(layer: Any) -> AlibiPlan | str:
    """What the fused op needs of ``layer`` (its scale and bias convention still to be probed), or
    the reason it cannot express the layer."""
    if getattr(layer, "quantization_mode", None) or getattr(layer, "lora_enabled", False):
        return "quantized or LoRA attention weights"
    if getattr(layer, "compute_dtype", "float32") != "float32" or getattr(layer, "variable_dtype", "float32") != "float32":
        return f"attention computed in {layer.compute_dtype} (fused only in float32)"
    shapes = {name: tuple(v.shape) for name, v in _weights(layer)}
    q_kernel = shapes.get(f"{PROJECTIONS[0]}/kernel", ())
    if len(q_kernel) != 3 or any(shapes.get(f"{n}/kernel") != q_kernel for n in PROJECTIONS[1:3]) \
            or f"{PROJECTIONS[3]}/kernel" not in shapes:
        return ("ALiBi attention without query_dense/key_dense/value_dense (hidden, heads, head) and output_dense "
                "projections")
    heads, head_size = int(q_kernel[1]), int(q_kernel[2])
    argument = "alibi" in inspect.signature(layer.call).parameters
    scale = getattr(layer, "inv_norm_factor", None)
    return AlibiPlan(heads=heads, head_size=head_size, argument=argument,
                     scale=float(scale) if scale is not None else float(1 / np.sqrt(head_size)))


def _alibi(layer: Any, plan: AlibiPlan, alibi: Any, total: int, dtype: Any) -> Any:
    """The ALiBi bias the layer adds: its ``alibi`` argument, or its ``AlibiBias`` sublayer's own
    bias over ``total`` keys (its call on zero scores)."""
    if plan.argument:
        return alibi
    return _alibi_sublayer(layer)(jnp.zeros((1, plan.heads, 1, total), dtype))


def _bias(plan: AlibiPlan, alibi: Any, mask: Any, dtype: Any) -> Any:
    """``(batch, heads, sequence, T)``: the scores' ALiBi where the mask keeps a key, else the lowest finite."""
    alibi = jnp.asarray(alibi, dtype)
    if plan.scaled:
        alibi = alibi * jnp.asarray(plan.scale, dtype)
    return jnp.where(jnp.asarray(mask)[:, None].astype(bool), alibi, jnp.finfo(dtype).min)


def alibi_attention(layer: Any, original: Callable[..., Any], context: int | None = None) -> Callable[..., Any]:
    """The stand-in for ``layer.call`` (``original``: the bound method) during the export: a fused
    region where the layer may fuse, else ``original`` as called. ``context``: the export's
    ``max_length`` (the probe's key length, within ``PROBE_KEYS .. MAX_PROBE_KEYS``)."""
    probe_keys = min(max(PROBE_KEYS, int(context or 0)), MAX_PROBE_KEYS)
    signature = inspect.signature(original)
    hidden_name = next(iter(signature.parameters))
    layer_at = layer_index(layer)
    plan = alibi_plan(layer)
    verdicts: dict[tuple[Any, ...], AlibiPlan | str] = {}

    def call(*args: Any, **kwargs: Any) -> Any:
        if isinstance(plan, str):
            decline(layer_at, plan)
            return original(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        named = dict(bound.arguments)
        x, mask, cache, index = (named.get(n) for n in (hidden_name, "attention_mask", "cache", "cache_update_index"))
        alibi = named.get("alibi")
        others = [n for n in named if n != hidden_name and n not in _COVERED and named[n] is not None]
        if cache is None or index is None or getattr(mask, "ndim", 0) != 3 or getattr(cache, "ndim", 0) != 5 or others:
            decline(layer_at, "called without a cache, its index and a (batch, query, key) mask")
            return original(*args, **kwargs)
        if plan.argument and getattr(alibi, "ndim", 0) != 4:
            decline(layer_at, "called without a (batch, heads, 1, key) ALiBi bias")
            return original(*args, **kwargs)
        if tuple(cache.shape[3:]) != (plan.heads, plan.head_size):
            decline(layer_at, f"a cache of {tuple(cache.shape[3:])} heads and head size, not the "
                                               f"projections' {(plan.heads, plan.head_size)}")
            return original(*args, **kwargs)
        if any(np.dtype(t.dtype) != np.float32 for t in (x, cache)):
            decline(layer_at, "attention inputs not float32")
            return original(*args, **kwargs)
        shapes = (tuple(x.shape[2:]), tuple(cache.shape[3:]), str(mask.dtype))
        if shapes not in verdicts:
            verdicts[shapes] = _verified(layer, original, plan, hidden_name, int(x.shape[-1]), mask.dtype, probe_keys)
        verdict = verdicts[shapes]
        if isinstance(verdict, str):
            decline(layer_at, verdict)
            return original(*args, **kwargs)
        return _region(layer, original, verdict, hidden_name, x, mask, cache, index, alibi, layer_at)

    return call


def _region(layer: Any, original: Callable[..., Any], plan: AlibiPlan, hidden_name: str, x: Any, mask: Any,
            cache: Any, index: Any, alibi: Any, layer_at: int) -> Any:
    import keras

    bias = _bias(plan, _alibi(layer, plan, alibi, cache.shape[2], x.dtype), mask, x.dtype)
    weights = _weights(layer)
    variables = [v for _, v in weights]
    inputs = {"x": x, "mask": mask, "cache": cache, "index": jnp.asarray(index, jnp.int32),
              **({"alibi": alibi} if plan.argument else {}), "bias": bias}

    def run(leaves: list[Any], x: Any, mask: Any, cache: Any, index: Any, *rest: Any) -> Any:
        # the layer's own call on these operands (bias is the lowering's, unused here)
        own = {"alibi": rest[0]} if plan.argument else {}
        with keras.StatelessScope(state_mapping=list(zip(variables, leaves))), library_core():
            return original(**{hidden_name: x}, **own, attention_mask=mask, cache=cache, cache_update_index=index)

    return call_region(KERAS_ATTENTION_MARK, run, inputs, [(n, v.value) for n, v in weights], style="alibi",
                       layer=layer_at, num_heads=plan.heads, kv_heads=plan.heads, head_size=plan.head_size,
                       scale=plan.scale, theta=None, projections=PROJECTIONS)


def _verified(layer: Any, original: Callable[..., Any], plan: AlibiPlan, hidden_name: str, hidden: int,
              mask_dtype: Any, total: int) -> AlibiPlan | str:
    """``plan`` with the bias convention for which the probe shows the layer's call computing
    exactly what the fused op does, else the reason it does not."""
    first = None
    for scaled in (False, True):
        candidate = dataclasses.replace(plan, scaled=scaled)
        reason = _probe(layer, original, candidate, hidden_name, hidden, mask_dtype, total)
        if reason is None:
            return candidate
        first = first or reason
    return first or "no probe ran"


def _probe(layer: Any, original: Callable[..., Any], plan: AlibiPlan, hidden_name: str, hidden: int,
           mask_dtype: Any, total: int) -> str | None:
    """None when the layer's call equals the fused op's lowering on random inputs (``total`` keys,
    the last 3 the step's), its output and its written cache, else the reason."""
    rng = np.random.default_rng(0)
    batch, seq, heads, head = 2, 3, plan.heads, plan.head_size
    index = total - seq
    x = rng.standard_normal((batch, seq, hidden)).astype(np.float32)
    cache = rng.standard_normal((batch, 2, total, heads, head)).astype(np.float32)
    visible = np.arange(total)[None, :] <= (index + np.arange(seq))[:, None]
    mask = np.broadcast_to(visible, (batch, seq, total)).copy()
    mask[1, :, :5] = False  # a left-padded row
    mask = mask.astype(np.dtype(mask_dtype))
    # an argument's bias: any per-head, per-key values (the probe checks how the call adds them)
    given = (rng.standard_normal((batch, heads, 1, total)) * 4).astype(np.float32) if plan.argument else None
    try:
        with jax.ensure_compile_time_eval():
            own = {"alibi": jnp.asarray(given)} if plan.argument else {}
            got = original(**{hidden_name: jnp.asarray(x)}, **own, attention_mask=jnp.asarray(mask),
                           cache=jnp.asarray(cache), cache_update_index=jnp.asarray(index, jnp.int32))
            if not (isinstance(got, tuple) and len(got) == 2):
                return "its call does not return (output, cache)"
            got_out, got_cache = np.asarray(got[0]), np.asarray(got[1])
            bias = np.asarray(_bias(plan, _alibi(layer, plan, given, total, jnp.float32), mask, jnp.float32))
            weights = {name: np.asarray(v.value, np.float32) for name, v in _weights(layer)}
    except Exception as e:  # noqa: BLE001 - a call that does not run on plain arrays is not fused
        return f"its call did not run on probe inputs ({type(e).__name__})"
    want_out, want_cache = _reference(weights, x, cache, index, bias, plan.scale)
    if got_out.shape != want_out.shape or got_cache.shape != want_cache.shape:
        return f"its call returns {got_out.shape} and a cache {got_cache.shape}, not {want_out.shape}, {want_cache.shape}"
    for got_x, want_x in ((got_out, want_out), (got_cache, want_cache)):
        if not np.allclose(got_x, want_x, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(want_x).max()))):
            return ("its call is not softmax(scale q.k + ALiBi + mask) v between its projections on a probe "
                    f"(largest difference {float(np.max(np.abs(got_x - want_x))):.3g})")
    return None


def _reference(weights: dict[str, np.ndarray], x: np.ndarray, cache: np.ndarray, index: int, bias: np.ndarray,
               scale: float) -> tuple[np.ndarray, np.ndarray]:
    """What the lowering computes: the projections, the step's keys/values written into the cache at
    ``index``, the fused op's attention with the additive ``bias``, the output projection."""
    def project(name: str) -> np.ndarray:
        return np.einsum("btm,mnh->btnh", x, weights[f"{name}/kernel"]) + weights.get(f"{name}/bias", 0.0)

    q, k, v = (project(name) for name in PROJECTIONS[:3])
    keys, values = cache[:, 0].copy(), cache[:, 1].copy()
    keys[:, index:index + x.shape[1]], values[:, index:index + x.shape[1]] = k, v
    with np.errstate(over="ignore"):  # a masked key's lowest finite bias plus a negative score: -inf, weight 0
        scores = np.einsum("bqhd,bkhd->bhqk", q, keys) * scale + bias
    weights_ = np.exp(scores - scores.max(-1, keepdims=True))
    attended = np.einsum("bhqk,bkhd->bqhd", weights_ / weights_.sum(-1, keepdims=True), values)
    out_kernel = weights[f"{PROJECTIONS[3]}/kernel"]
    out = attended.reshape(x.shape[0], x.shape[1], -1) @ out_kernel.reshape(attended.shape[2] * attended.shape[3], -1)
    out = out + weights.get(f"{PROJECTIONS[3]}/bias", 0.0)
    return out.astype(np.float32), np.stack([keys, values], axis=1)


__all__ = ["AlibiPlan", "alibi_attention", "alibi_layers", "alibi_plan"]

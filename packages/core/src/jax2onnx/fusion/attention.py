"""Dot-product and multi-head attention."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

import numpy as np
import onnx_ir as ir

from .operands import Operands, concat_weights, one_output_like, reshape_const

# ---------------------------------------------------------------------------------------------
# Attention


def _origins(site: Any) -> dict[Any, frozenset[Any]]:
    """For each variable of a library region's body, the region operands it is computed from."""
    inputs = list(site.body.jaxpr.invars)
    origin: dict[Any, frozenset[Any]] = {v: frozenset([v]) for v in inputs}
    for e in site.body.jaxpr.eqns:
        found = frozenset().union(*(origin.get(v, frozenset()) for v in e.invars if not hasattr(v, "val")))
        for v in e.outvars:
            origin[v] = found
    return origin


def recognize_flax_attention(site: Any, *, causal: bool = True) -> tuple[dict[str, Any], list[int]] | None:
    """The operands of a flax-style ``dot_product_attention(query, key, value, bias, mask, ...)``
    call found in the trace (a plain function: its operands come in order of first use): query and
    key are what the first ``dot_general`` contracts, value the second one's operand computed from
    one operand alone; the operand that selects (boolean, or flax's float 0/1 mask) is the mask, one
    that is added the bias. ``is_causal``
    (``causal``: the function has the keyword) shows as an ``iota`` comparison. Returns
    ``({"operands": names, "is_causal": ...}, argument order)`` for :func:`lower_dot_product_attention`."""
    inputs = list(site.body.jaxpr.invars)
    dots = [e for e in site.body.jaxpr.eqns if e.primitive.name == "dot_general"]
    if len(dots) != 2 or not 3 <= len(inputs) <= 5:
        return None
    origin = _origins(site)
    q, k = (origin.get(x, frozenset()) for x in dots[0].invars)
    v = [origin[x] for x in dots[1].invars if len(origin.get(x, ())) == 1]
    if len(q) != 1 or len(k) != 1 or len(v) != 1:
        return None
    roles = {"q": next(iter(q)), "k": next(iter(k)), "v": next(iter(v[0]))}
    if len(set(roles.values())) != 3 or any(len(x.aval.shape) != 4 for x in roles.values()):
        return None
    rest = [x for x in inputs if x not in roles.values()]
    # the mask is what selects (the condition of a select / jnp.where; a float 0/1 mask too, as
    # flax's make_causal_mask gives); the bias is what else there is (it is added to the logits)
    selecting = frozenset().union(*(origin.get(e.invars[0], frozenset()) for e in site.body.jaxpr.eqns
                                    if e.invars and (e.primitive.name == "select_n" or e.params.get("name") == "_where")))
    masks = [x for x in rest if np.dtype(x.aval.dtype) == np.bool_ or x in selecting]
    biases = [x for x in rest if x not in masks]
    if len(masks) > 1 or len(biases) > 1:
        return None
    if biases:
        roles["bias"] = biases[0]
    if masks:
        roles["mask"] = masks[0]
    params: dict[str, Any] = {"operands": tuple(roles)}
    if causal:
        params["is_causal"] = any(e.primitive.name == "iota" for e in site.eqns())
    return params, [inputs.index(x) for x in roles.values()]


def call_flax_attention(original: Callable[..., Any], arrays: Any, params: Mapping[str, Any]) -> Any:
    """How core's verifying retrace calls a flax ``dot_product_attention`` with recognized params."""
    named = dict(zip(params["operands"], arrays, strict=True))
    extra = {"is_causal": True} if params.get("is_causal") else {}
    return original(named["q"], named["k"], named["v"], named.get("bias"), named.get("mask"), **extra)


def flax_attention_lowering(lowerings: Any, path: str, *, causal: bool = True, exact: bool = False) -> None:
    """Register :func:`lower_dot_product_attention` for the flax-style attention function at ``path``
    (``"flax.nnx.dot_product_attention"``), found in the trace by the equations its call emits
    (:meth:`jax2onnx.plugin.Lowerings.register_library`; nothing of the library is replaced).
    Dropout, ``module`` and other keywords change the equations: core's retrace then declines.
    ``exact`` as in :func:`lower_dot_product_attention`."""
    lowerings.register_library(path, recognize=partial(recognize_flax_attention, causal=causal),
                               call=call_flax_attention)(partial(lower_dot_product_attention, exact=exact))


def attention_inputs(query: Any, key: Any, value: Any, mask: Any = None) -> tuple[dict[str, Any], Callable[..., tuple]]:
    """The region inputs of an attention call and how the body gets ``(q, k, v, mask)`` back.

    Self-attention passes one array three times: it becomes one operand ``"q"`` (so the lowering
    can project Q|K|V with one MatMul); a distinct key/value adds ``"k"``/``"v"``, a mask ``"mask"``.
    """
    inputs = {"q": query}
    if key is not query:
        inputs["k"] = key
    if value is not key:
        inputs["v"] = value
    if mask is not None:
        inputs["mask"] = mask
    names = tuple(inputs)

    def unpack(*arrays: Any) -> tuple:
        named = dict(zip(names, arrays, strict=True))
        q = named["q"]
        k = named.get("k", q)
        return q, k, named.get("v", k), named.get("mask")

    return inputs, unpack


def additive_mask(ctx: Any, mask: ir.Value | None, bias: ir.Value | None, dtype: Any) -> ir.Value | None:
    """Attention's ``attn_mask`` from a boolean keep-mask and/or a float bias: masked logits get
    ``-0.7 * finfo.max`` (a large finite value, so a fully masked row stays finite and uniform, as
    the libraries' ``finfo.min`` fill makes it)."""
    if mask is None:
        return None if bias is None else ctx.cast(bias, dtype)
    keep = ctx.cast(mask, np.bool_)
    allowed = ctx.const(np.zeros((), dtype=dtype)) if bias is None else ctx.cast(bias, dtype)
    masked = ctx.const(np.asarray(-0.7 * np.finfo(np.dtype(dtype)).max, dtype=dtype))
    return ctx.op.Where(keep, allowed, masked)


def _mask_fits(shape: tuple[Any, ...] | None) -> bool:
    return shape is None or 2 <= len(shape) <= 4


def _attention(ctx: Any, q: ir.Value, k: ir.Value, v: ir.Value, attn_mask: ir.Value | None, heads: int,
               kv_heads: int) -> ir.Value:
    is_causal = bool(ctx.marked.params.get("is_causal", False))
    return ctx.op.Attention(q, k, v, attn_mask, q_num_heads=heads, kv_num_heads=kv_heads,
                            is_causal=1 if is_causal else None)


def _attention_runs(ctx: Any, exact: bool) -> bool:
    return np.dtype(ctx.avals_out[0].dtype) in ctx.kernel_dtypes("Attention", exact=exact)


def lower_dot_product_attention(ctx: Any, *ins: ir.Value, exact: bool = False) -> ir.Value | None:
    """A ``dot_product_attention`` region (operands ``q``, ``k``, ``v`` as (batch, seq, heads,
    depth), optional ``bias``/``mask``; param ``is_causal``) → the opset-23 ``Attention`` op on the
    (batch, seq, heads*depth) layout, for the element types the target runs ``Attention`` on (none
    before opset 23). ``exact``: only those its kernel computes exactly (onnxruntime's float64
    Attention is float32-accurate, 3e-8 off where JAX's float64 result is exact: the kernel table
    records it as inexact), so such a dtype keeps the library's decomposition."""
    if not _attention_runs(ctx, exact):
        return None
    ops = Operands(ctx, ins)
    q_shape, k_shape, v_shape = ops.shape("q"), ops.shape("k"), ops.shape("v")
    if len(q_shape) != 4 or len(k_shape) != 4 or len(v_shape) != 4:
        return None
    heads, kv_heads, depth_v = q_shape[2], k_shape[2], v_shape[3]
    if not one_output_like(ctx, (*q_shape[:3], depth_v)):
        return None
    if any(name in ops and not _mask_fits(ops.shape(name)) for name in ("bias", "mask")):
        return None
    dtype = ctx.avals_out[0].dtype
    flat = ctx.i64([0, 0, -1])
    q, k, v = (ctx.op.Reshape(ctx.cast(ops[n], dtype), flat) for n in ("q", "k", "v"))
    attn_mask = additive_mask(ctx, ops.get("mask"), ops.get("bias"), dtype)
    y = _attention(ctx, q, k, v, attn_mask, int(heads), int(kv_heads))
    return ctx.op.Reshape(y, ctx.i64([0, 0, int(heads), int(depth_v)]))


def lower_multi_head_attention(ctx: Any, *ins: ir.Value, exact: bool = False) -> ir.Value | None:
    """A multi-head attention layer's region → projections, ``Attention``, output projection.

    Operands: ``q`` (and ``k``/``v`` when they differ, see :func:`attention_inputs`), optional
    ``mask``; weights ``query``/``key``/``value`` ``/kernel`` (in, heads, depth) and ``/bias``
    (heads, depth), ``out/kernel`` (heads, depth, features) and ``out/bias``. Self-attention with
    constant weights projects Q|K|V with one MatMul and a Split. ``exact`` as in
    :func:`lower_dot_product_attention`.
    """
    if not _attention_runs(ctx, exact):
        return None
    ops = Operands(ctx, ins)
    names = ("query", "key", "value", "out")
    if any(f"{n}/kernel" not in ops for n in names):
        return None
    _, heads, depth = ops.shape("query/kernel")
    _, kv_heads, _ = ops.shape("key/kernel")
    _, _, depth_v = ops.shape("value/kernel")
    out_features = ops.shape("out/kernel")[2:]
    q_shape = ops.shape("q")
    if len(out_features) != 1 or not one_output_like(ctx, (*q_shape[:2], out_features[0])):
        return None
    if "mask" in ops and not _mask_fits(ops.shape("mask")):
        return None
    dtype = np.dtype(ctx.avals_out[0].dtype)
    widths = [heads * depth, kv_heads * depth, kv_heads * depth_v]

    def project(x: ir.Value, name: str, width: int) -> ir.Value:
        kernel = reshape_const(ctx, ctx.cast(ops[f"{name}/kernel"], dtype), [ops.shape(f"{name}/kernel")[0], width])
        y = ctx.op.MatMul(x, kernel)
        if f"{name}/bias" not in ops:
            return y
        return ctx.op.Add(y, reshape_const(ctx, ctx.cast(ops[f"{name}/bias"], dtype), [width]))

    x_q = ctx.cast(ops["q"], dtype)
    has_bias = [f"{n}/bias" in ops for n in names[:3]]
    weights = [ops[f"{n}/kernel"] for n in names[:3]] + [ops[f"{n}/bias"] for n, h in zip(names[:3], has_bias) if h]
    # Self-attention with constant weights: one MatMul (+ Add) on the Q|K|V weights, joined by a
    # Concat node (see concat_weights: no joined copy beside the caller's weights during export).
    if "k" not in ops and "v" not in ops and all(w.const_value is not None for w in weights):
        def flat(name: str, shape: list[int]) -> ir.Value:
            return reshape_const(ctx, ctx.cast(ops[name], dtype), shape)

        kernel = concat_weights(ctx, [flat(f"{n}/kernel", [ops.shape(f"{n}/kernel")[0], w])
                                      for n, w in zip(names[:3], widths, strict=True)], axis=1)
        qkv = ctx.op.MatMul(x_q, kernel)
        if any(has_bias):
            bias = concat_weights(ctx, [flat(f"{n}/bias", [w]) if h else ctx.const(np.zeros(w, dtype))
                                        for n, w, h in zip(names[:3], widths, has_bias, strict=True)], axis=0)
            qkv = ctx.op.Add(qkv, bias)
        q, k, v = ctx.op.Split(qkv, ctx.i64(widths), axis=-1, _outputs=3)
    else:
        x_k = ctx.cast(ops["k"], dtype) if "k" in ops else x_q
        x_v = ctx.cast(ops["v"], dtype) if "v" in ops else x_k
        q, k, v = project(x_q, "query", widths[0]), project(x_k, "key", widths[1]), project(x_v, "value", widths[2])
    y = _attention(ctx, q, k, v, additive_mask(ctx, ops.get("mask"), None, dtype), int(heads), int(kv_heads))
    out = ops.shape("out/kernel")[-1]
    y = ctx.op.MatMul(y, reshape_const(ctx, ctx.cast(ops["out/kernel"], dtype), [heads * depth_v, out]))
    return ctx.op.Add(y, ctx.cast(ops["out/bias"], dtype)) if "out/bias" in ops else y

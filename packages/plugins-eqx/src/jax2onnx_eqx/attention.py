"""eqx.nn.MultiheadAttention → the opset-23 ``Attention`` op.

An unbatched call (query ``(q_seq, q_size)``) gains ONNX's batch axis with one ``Unsqueeze``; the
projections are MatMuls on the transposed (constant) weights and produce Attention's 3-D layout
``(1, seq, heads*size)`` directly; self-attention (``mha(x, x, x)``) is one MatMul on the
concatenated Q|K|V weights and a ``Split``. The mask (``(q_seq, kv_seq)`` or per head) becomes the
additive mask ``Where(mask, 0, -0.7 * finfo.max)``: equinox fills masked logits with ``finfo.min``,
so a fully masked row is uniform in both.

Left to equinox's own math (and the lax/jnp lowerings): attention dropout in training mode,
``process_heads`` (rotary embeddings and the like), calls inside some other vmapped function
(per-example tracers), and float64, for which onnxruntime's Attention kernel is only
float32-accurate. ``jax.vmap(mha)(q, k, v[, mask])`` is the same graph with the batch axis in
front and no Unsqueeze/Squeeze (``batching.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from jax2onnx.fusion import (
    Operands,
    additive_mask,
    attention_inputs,
    concat_weights,
    const_array,
    is_array,
    one_output_like,
)
from jax2onnx.plugin import Lowerings, ModulePatch

from ._fusion import call_module
from .batching import fused_call

lowerings = Lowerings()

MULTIHEAD_ATTENTION = "jax2onnx_eqx.multihead_attention"


def _no_dropout(self: Any, inference: Any, deterministic: Any) -> bool:
    dropout = getattr(self, "dropout", None)
    if dropout is None or float(dropout.p) == 0.0:
        return True
    flag = inference if inference is not None else deterministic if deterministic is not None else dropout.inference
    return flag is True


def fuse(module, query, key_, value, mask=None, *, body, batch: int):
    """The region for ``module(query, key_, value, mask)`` (``batch`` = 0) or its ``jax.vmap``
    (``batch`` = 1, see ``batching.py``); ``call(m, q, k, v, mask)`` is equinox's computation on the
    rebuilt module. None when equinox's own code must run."""
    if (
        batch > 1  # several vmaps: equinox's math (Attention's layout has one batch axis)
        or not all(is_array(a) and a.ndim == 2 + batch for a in (query, key_, value))
        or (mask is not None and (not is_array(mask) or mask.ndim - batch not in (2, 3)))
    ):
        return None
    inputs, unpack = attention_inputs(query, key_, value, mask)

    def region(m, *arrays):
        return body(m, *unpack(*arrays))

    return call_module(MULTIHEAD_ATTENTION, module, region, inputs, num_heads=int(module.num_heads), batch=batch)


def plain_call(module, inference=None, deterministic=None, process_heads=None) -> bool:
    return process_heads is None and _no_dropout(module, inference, deterministic)


def _patch_multihead_attention(original):
    def __call__(self, query, key_, value, mask=None, *args, key=None, inference=None, deterministic=None,
                 process_heads=None, **kwargs):
        out = None
        if not args and not kwargs and plain_call(self, inference, deterministic, process_heads):
            def per_example(m, q, k, v, msk):
                return original(m, q, k, v, msk, inference=inference, deterministic=deterministic)

            out = fused_call(fuse, per_example, self, query, key_, value, mask)
        if out is None:
            return original(self, query, key_, value, mask, *args, key=key, inference=inference,
                            deterministic=deterministic, process_heads=process_heads, **kwargs)
        return out

    return __call__


patches = [ModulePatch("equinox.nn.MultiheadAttention", "__call__", _patch_multihead_attention)]


@lowerings.register_call(MULTIHEAD_ATTENTION)
def lower_multihead_attention(ctx, *ins):
    dtype = np.dtype(ctx.avals_out[0].dtype)
    # none before opset 23; float64, whose kernel is float32-accurate, keeps equinox's math
    if dtype not in ctx.kernel_dtypes("Attention", exact=True):
        return None
    ops = Operands(ctx, ins)
    projections = ("query_proj", "key_proj", "value_proj", "output_proj")
    if any(f"{p}/weight" not in ops for p in projections):
        return None
    heads = ctx.marked.params["num_heads"]
    batch = ctx.marked.params["batch"]
    out_size = ops.shape("output_proj/weight")[0]
    if not one_output_like(ctx, (*ops.shape("q")[:-1], out_size)):
        return None
    zero = ctx.i64([0])

    def batched(x: Any) -> Any:  # ONNX's batch axis for one example
        return x if batch else ctx.op.Unsqueeze(x, zero)

    def project(x: Any, name: str) -> Any:
        w = ctx.op.Transpose(ctx.cast(ops[f"{name}/weight"], dtype), perm=[1, 0])  # folded: a constant
        y = ctx.op.MatMul(x, w)
        return ctx.op.Add(y, ctx.cast(ops[f"{name}/bias"], dtype)) if f"{name}/bias" in ops else y

    x_q = batched(ctx.cast(ops["q"], dtype))
    in_proj = projections[:3]
    constant = all(const_array(ops[f"{p}/weight"]) is not None for p in in_proj) and all(
        const_array(ops[f"{p}/bias"]) is not None for p in in_proj if f"{p}/bias" in ops)
    if "k" not in ops and "v" not in ops and constant:
        # Self-attention with constant weights: one MatMul on the Q|K|V weights joined by a Concat
        # of their (folded) transposes, never an np.concatenate copy beside the model's own.
        widths = [ops.shape(f"{p}/weight")[0] for p in in_proj]
        w_qkv = concat_weights(ctx, [ctx.op.Transpose(ctx.cast(ops[f"{p}/weight"], dtype), perm=[1, 0])
                                     for p in in_proj], axis=1)
        qkv = ctx.op.MatMul(x_q, w_qkv)
        if any(f"{p}/bias" in ops for p in in_proj):
            qkv = ctx.op.Add(qkv, concat_weights(ctx, [
                ctx.cast(ops[f"{p}/bias"], dtype) if f"{p}/bias" in ops else ctx.const(np.zeros(w, dtype))
                for p, w in zip(in_proj, widths, strict=True)], axis=0))
        q, k, v = ctx.op.Split(qkv, ctx.i64(widths), axis=-1, _outputs=3)
    else:
        x_k = batched(ctx.cast(ops["k"], dtype)) if "k" in ops else x_q
        x_v = batched(ctx.cast(ops["v"], dtype)) if "v" in ops else x_k
        q, k, v = project(x_q, "query_proj"), project(x_k, "key_proj"), project(x_v, "value_proj")
    attn_mask = None
    if "mask" in ops:
        attn_mask = additive_mask(ctx, ops["mask"], None, dtype)
        if batch and len(ops.shape("mask")) == 3:  # (batch, q, kv): the heads axis goes second
            attn_mask = ctx.op.Unsqueeze(attn_mask, ctx.i64([1]))
    y = project(ctx.op.Attention(q, k, v, attn_mask, q_num_heads=heads, kv_num_heads=heads), "output_proj")
    return y if batch else ctx.op.Squeeze(y, zero)

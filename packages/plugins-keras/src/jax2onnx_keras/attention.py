"""keras.layers.MultiHeadAttention → opset-23 ``Attention`` between plain MatMul projections.

The projections are ``EinsumDense`` layers whose kernels are (model, heads, head_size); flattened
to (model, heads * head_size) they are one ``MatMul`` (+ ``Add``) each, producing exactly the 3-D
(batch, length, heads * head_size) form ``Attention`` takes with ``q_num_heads``/``kv_num_heads``,
so no Reshape/Transpose surrounds it. Self-attention (query, key and value the same tensor) uses
one MatMul over the concatenated Q|K|V weights and a ``Split``. The output projection is one more
MatMul (+ Add). Masks, causal masking, gating, returned scores and custom attention axes keep
Keras's own code (whose ``dot_product_attention`` the jnp pack still lowers to ``Attention``).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from jax2onnx.fusion import Operands, concat_weights, is_array, reshape_const, static_ints
from jax2onnx.plugin import Lowerings

from ._fusion import call_layer, mark_name, one_output_like, patch, plain_float32

lowerings = Lowerings()

MHA = "multi_head_attention"


def _plain(self: Any, arrays: list[Any]) -> bool:
    return (
        all(is_array(a) and a.ndim == 3 for a in arrays)
        and plain_float32(self, arrays[0])
        and not getattr(self, "_use_gate", False)
        and tuple(getattr(self, "_attention_axes", None) or (1,)) == (1,)
        and type(self)._compute_attention is _base_compute_attention()
    )


def _base_compute_attention() -> Any:
    from keras.src.layers.attention.multi_head_attention import MultiHeadAttention

    return MultiHeadAttention._compute_attention


def _patch_mha(original):
    def call(self, query, value, key=None, query_mask=None, value_mask=None, key_mask=None, attention_mask=None,
             return_attention_scores=False, training=None, use_causal_mask=False):
        def keras_call():
            return original(self, query, value, key, query_mask, value_mask, key_mask, attention_mask,
                            return_attention_scores, training, use_causal_mask)

        masks = (query_mask, value_mask, key_mask, attention_mask)
        if any(m is not None for m in masks) or return_attention_scores or use_causal_mask:
            return keras_call()
        from keras.src import backend

        arrays = [query, value] + ([] if key is None else [key])
        # A Keras mask travelling on an input (from an Embedding(mask_zero=True)) is applied by Keras's code.
        if not _plain(self, arrays) or any(backend.get_keras_mask(a) is not None for a in arrays):
            return keras_call()
        static = {"num_heads": int(self._num_heads), "key_dim": int(self._key_dim),
                  "scale": float(1.0 / math.sqrt(float(self._key_dim)))}
        if value is query and (key is None or key is query):  # self-attention: one fused Q|K|V product
            return call_layer(MHA, self, lambda layer, x: original(layer, x, x, training=training), {"query": query},
                              self_attention=True, **static)
        if key is None:
            return call_layer(MHA, self, lambda layer, q, v: original(layer, q, v, training=training),
                              {"query": query, "value": value}, self_attention=False, **static)
        return call_layer(MHA, self, lambda layer, q, v, k: original(layer, q, v, k, training=training),
                          {"query": query, "value": value, "key": key}, self_attention=False, **static)

    return call


patches = [patch("keras.src.layers.attention.multi_head_attention", "MultiHeadAttention", _patch_mha)]


def _flat_weights(ctx: Any, ops: Operands, name: str) -> tuple[Any, Any | None, int] | None:
    """``<name>/kernel`` (model, heads, size) as (model, heads * size), its bias flattened, the width."""
    k = ops.get(f"{name}/kernel")
    if k is None or len(ops.shape(f"{name}/kernel")) != 3 or not static_ints(ops.shape(f"{name}/kernel")):
        return None
    d, h, s = ops.shape(f"{name}/kernel")
    kernel = reshape_const(ctx, k, [d, h * s])
    bias = ops.get(f"{name}/bias")
    if bias is not None:
        if ops.shape(f"{name}/bias") != (h, s):
            return None
        bias = reshape_const(ctx, bias, [h * s])
    return kernel, bias, h * s


def _project(ctx: Any, x: Any, kernel: Any, bias: Any | None) -> Any:
    y = ctx.op.MatMul(x, kernel)
    return y if bias is None else ctx.op.Add(y, bias)


@lowerings.register_call(mark_name(MHA))
def lower_mha(ctx, *ins):
    if np.dtype(np.float32) not in ctx.kernel_dtypes("Attention"):  # none before opset 23
        return None
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    h = p["num_heads"]
    q_shape = ops.shape("query")
    out = ops.get("attention_output/kernel")
    if out is None or len(ops.shape("attention_output/kernel")) != 3:
        return None
    oh, ov, oe = ops.shape("attention_output/kernel")
    if not one_output_like(ctx, (*q_shape[:-1], oe)):
        return None
    parts = [_flat_weights(ctx, ops, n) for n in ("query", "key", "value")]
    if any(part is None for part in parts) or oh != h:
        return None
    (wq, bq, nq), (wk, bk, nk), (wv, bv, nv) = parts
    if p["self_attention"]:
        w = concat_weights(ctx, [wq, wk, wv], axis=1)
        b = None
        if bq is not None and bk is not None and bv is not None:
            b = concat_weights(ctx, [bq, bk, bv], axis=0)
        elif not (bq is None and bk is None and bv is None):
            return None
        qkv = _project(ctx, ops["query"], w, b)
        q, k, v = ctx.op.Split(qkv, ctx.i64([nq, nk, nv]), axis=-1, _outputs=3)
    else:
        value = ops["value"]
        key = ops.get("key")
        q = _project(ctx, ops["query"], wq, bq)
        k = _project(ctx, key if key is not None else value, wk, bk)
        v = _project(ctx, value, wv, bv)
    attended = ctx.op.Attention(q, k, v, q_num_heads=h, kv_num_heads=h, scale=p["scale"])
    w_out = reshape_const(ctx, out, [oh * ov, oe])
    return _project(ctx, attended, w_out, ops.get("attention_output/bias"))

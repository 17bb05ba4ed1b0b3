"""nn.dot_product_attention, nn.MultiHeadDotProductAttention / nn.SelfAttention → opset-23 ``Attention``.

Both use Attention's 3-D form, (batch, seq, heads*depth) with ``q_num_heads``/``kv_num_heads``:
flax's (batch, seq, heads, depth) arrays reach it by a free ``Reshape`` (target ``[0, 0, -1]``, no
Shape ops), never a Transpose. In MultiHeadDotProductAttention the DenseGeneral projections already
produce that layout: self-attention with constant weights is one MatMul + Add on the concatenated
Q|K|V weights, one Split, Attention, and the output projection's MatMul + Add.

Masks (``nn.make_attention_mask``, ``nn.make_causal_mask``, combined or not): flax replaces masked
logits by ``finfo.min`` before the softmax, so a fully masked row becomes uniform. Attention's
boolean mask would give zeros there, so the mask becomes the additive mask
``Where(mask, bias or 0, -0.7 * finfo.max)``: every masked logit is absorbed into that constant, so
partly and fully masked rows match flax.

Dropout on the attention weights (rate > 0 and not deterministic), ``sow_weights``, ``decode``
caches, ``normalize_qk``, custom dot_generals/einsums and ranks other than 4-D (function) / 3-D
(module) are left to flax's own code and the lax/jnp lowerings.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from flax.linen import attention as _flax_attention
from jax2onnx.fusion import (
    attention_inputs,
    flax_attention_lowering,
    is_array,
    lower_multi_head_attention,
)
from jax2onnx.plugin import Lowerings, ModulePatch

from ._fusion import call_module, fusable, linen_calls

lowerings = Lowerings()

MULTI_HEAD_ATTENTION = "jax2onnx_linen.multi_head_attention"

#: flax's own attention function: the module fuses only with it.
FLAX_DOT_PRODUCT_ATTENTION = _flax_attention.dot_product_attention

def _no_dropout(rate: Any, deterministic: Any) -> bool:
    return float(rate) == 0.0 or deterministic is True


def _patch_multi_head_attention(original):
    def __call__(self, inputs_q, inputs_k=None, inputs_v=None, *args, inputs_kv=None, mask=None, deterministic=None,
                 dropout_rng=None, sow_weights=False, **kwargs):
        det = deterministic if deterministic is not None else self.deterministic
        if (
            args
            or kwargs
            or inputs_kv is not None
            or self.decode
            or sow_weights
            or self.normalize_qk
            or not _no_dropout(self.dropout_rate, det)
            or self.attention_fn is not FLAX_DOT_PRODUCT_ATTENTION
            or any(getattr(self, a, None) is not None for a in (
                "qkv_dot_general", "out_dot_general", "qkv_dot_general_cls", "out_dot_general_cls",
                "qk_attn_weights_einsum_cls", "attn_weights_value_einsum_cls"))
            or not is_array(inputs_q)
            or inputs_q.ndim != 3
            or any(a is not None and (not is_array(a) or a.ndim != 3) for a in (inputs_k, inputs_v))
            or (mask is not None and (not is_array(mask) or mask.ndim > 4))
            or not fusable(self)
        ):
            return original(self, inputs_q, inputs_k, inputs_v, *args, inputs_kv=inputs_kv, mask=mask,
                            deterministic=deterministic, dropout_rng=dropout_rng, sow_weights=sow_weights, **kwargs)
        k = inputs_q if inputs_k is None else inputs_k
        inputs, unpack = attention_inputs(inputs_q, k, k if inputs_v is None else inputs_v, mask)

        def body(m, *arrays):
            q, kk, vv, msk = unpack(*arrays)
            return original(m, q, kk, vv, mask=msk, deterministic=deterministic)

        return call_module(MULTI_HEAD_ATTENTION, self, body, inputs)

    return __call__


patches = [
    ModulePatch("flax.linen.MultiHeadDotProductAttention", "__call__", _patch_multi_head_attention, interceptor=linen_calls),
]


# ---------------------------------------------------------------------------------------------
# Lowerings: the kit's (operands q/k/v/mask/bias and query/key/value/out kernels, as flax names them).
# exact: a dtype whose Attention kernel the runtime table records as inexact (float64, which
# onnxruntime computes float32-accurate) keeps flax's decomposition.

# nn.dot_product_attention is a plain function: its calls are found by the equations they emit
flax_attention_lowering(lowerings, "flax.linen.dot_product_attention", causal=False, exact=True)
lowerings.add(f"call:{MULTI_HEAD_ATTENTION}", partial(lower_multi_head_attention, exact=True))

"""nnx.dot_product_attention and nnx.MultiHeadAttention → the opset-23 ``Attention`` op.

Both use Attention's 3-D form, (batch, seq, heads*depth) with ``q_num_heads``/``kv_num_heads``:
flax's (batch, seq, heads, depth) arrays reach it by a free ``Reshape`` (target ``[0, 0, -1]``, no
Shape ops), never a Transpose. In MultiHeadAttention the projections already produce that layout:
self-attention is one MatMul + Add on the concatenated Q|K|V weights, one Split, Attention, and the
output projection's MatMul + Add.

Masks: JAX replaces masked logits by a large negative number before the softmax, so a fully masked
row becomes uniform. Attention's boolean mask would give zeros there, so the boolean mask becomes
the additive mask ``Where(mask, bias or 0, -0.7 * finfo.max)`` (JAX's own constant), which
matches both in partly and fully masked rows, however large the masked logits are.

Dropout on the attention weights (rate > 0 and not deterministic), ``module``/``sow_weights``,
``decode`` caches, ``normalize_qk`` and ranks other than 4-D (function) / 3-D (module) are left to
flax's own code and the lax/jnp lowerings.
"""

from __future__ import annotations

from typing import Any

from flax.nnx.nn import attention as _flax_attention
from jax2onnx.fusion import (
    attention_inputs,
    flax_attention_lowering,
    lower_multi_head_attention,
)
from jax2onnx.plugin import Lowerings, ModulePatch, is_array

from ._fusion import call_module, graphdef_node_types

lowerings = Lowerings()

MULTI_HEAD_ATTENTION = "jax2onnx_nnx.multi_head_attention"

#: flax's own attention function: MultiHeadAttention fuses only with it.
FLAX_DOT_PRODUCT_ATTENTION = _flax_attention.dot_product_attention

def _no_dropout(rate: Any, deterministic: Any) -> bool:
    return float(rate) == 0.0 or deterministic is True


def _patch_multi_head_attention(original):
    def __call__(self, inputs_q, inputs_k=None, inputs_v=None, *, mask=None, deterministic=None, rngs=None,
                 sow_weights=False, decode=None, **kwargs):
        decode_on = decode if decode is not None else self.decode
        det = deterministic if deterministic is not None else self.deterministic
        is_causal = kwargs.pop("is_causal", False)
        if (
            decode_on is not False
            or sow_weights
            or getattr(self, "normalize_qk", False)
            or not _no_dropout(self.dropout_rate, det)
            or self.attention_fn is not FLAX_DOT_PRODUCT_ATTENTION
            or any(v is not None for v in kwargs.values())  # shardings
            or not isinstance(is_causal, bool)
            or not is_array(inputs_q)
            or inputs_q.ndim != 3
            or any(a is not None and (not is_array(a) or a.ndim != 3) for a in (inputs_k, inputs_v))
            or (mask is not None and (not is_array(mask) or mask.ndim > 4))
        ):
            if is_causal:
                kwargs["is_causal"] = is_causal
            return original(self, inputs_q, inputs_k, inputs_v, mask=mask, deterministic=deterministic, rngs=rngs,
                            sow_weights=sow_weights, decode=decode, **kwargs)
        k = inputs_q if inputs_k is None else inputs_k
        inputs, unpack = attention_inputs(inputs_q, k, k if inputs_v is None else inputs_v, mask)
        extra = {"is_causal": True} if is_causal else {}

        def body(m, *arrays):
            q, kk, vv, msk = unpack(*arrays)
            return original(m, q, kk, vv, mask=msk, deterministic=deterministic, decode=False, **extra)

        return call_module(MULTI_HEAD_ATTENTION, self, body, inputs, is_causal=is_causal)

    return __call__


patches = [
    ModulePatch("flax.nnx.MultiHeadAttention", "__call__", _patch_multi_head_attention, holders=graphdef_node_types),
]


# ---------------------------------------------------------------------------------------------
# Lowerings: the kit's (operands q/k/v/mask/bias and query/key/value/out kernels, as flax names them)

# nnx.dot_product_attention is a plain function: its calls are found by the equations they emit
flax_attention_lowering(lowerings, "flax.nnx.dot_product_attention")
lowerings.add(f"call:{MULTI_HEAD_ATTENTION}", lower_multi_head_attention)

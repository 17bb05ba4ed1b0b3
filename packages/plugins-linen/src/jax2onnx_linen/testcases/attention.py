"""Testcases of :mod:`jax2onnx_linen.attention` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import numpy as np
from flax import linen as nn
from jax2onnx.testing import Component, Testcase

from ._testing import applied, float32_ops

_SIGNED = {"low": -1.0, "high": 1.0}


class _Causal(nn.Module):
    """Self-attention with the causal mask built from the input (a constant for static lengths)."""

    @nn.compact
    def __call__(self, x):
        return nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8)(x, mask=nn.make_causal_mask(x[..., 0]))


class _Padded(nn.Module):
    """Self-attention with a padding mask from per-position validity, combined with causal."""

    @nn.compact
    def __call__(self, x, valid):
        pad = nn.make_attention_mask(valid > 0, valid > 0)
        return nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8)(
            x, mask=nn.combine_masks(pad, nn.make_causal_mask(valid)))


class _Cross(nn.Module):
    @nn.compact
    def __call__(self, x, context):
        return nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=8, out_features=5)(x, context)


def _valid(rng, shape, dtype):
    """Validity per position (0 = padding), so some rows are fully masked."""
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 3, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _mha(**kw):
    return applied(lambda: nn.MultiHeadDotProductAttention(**kw), (1, 4, 6), **_SIGNED)


_ATT = dict(check=float32_ops("Attention", forbids=("Softmax", "Einsum", "Transpose")))


_BSHD = ("B", 5, 2, 4)


components = [
    Component(
        name="linen.dot_product_attention",
        onnx=["Attention", "Reshape"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_dpa", lambda q, k, v: nn.dot_product_attention(q, k, v), [_BSHD] * 3,
                     check=float32_ops("Attention", forbids=("Softmax", "Einsum", "Transpose"), max_nodes=5)),
            Testcase("linen_dpa_cross_lengths", lambda q, k, v: nn.dot_product_attention(q, k, v),
                     [("B", 3, 2, 4), ("B", 6, 2, 4), ("B", 6, 2, 3)], **_ATT),
            Testcase("linen_dpa_bias", lambda q, k, v, b: nn.dot_product_attention(q, k, v, bias=b),
                     [("B", 4, 2, 3), ("B", 5, 2, 3), ("B", 5, 2, 3), ("B", 2, 4, 5)], **_ATT),
            Testcase("linen_dpa_causal_mask",
                     lambda q, k, v: nn.dot_product_attention(q, k, v, mask=nn.make_causal_mask(q[..., 0, 0])),
                     [(2, 4, 2, 3)] * 3, **_ATT),
        ],
    ),
    Component(
        name="linen.multi_head_dot_product_attention",
        onnx=["Attention", "MatMul", "Add", "Split"],
        since="v0.2.0",
        testcases=[
            Testcase("linen_mha_self", factory=_mha(num_heads=2, qkv_features=8), input_shapes=[("B", 4, 6)],
                     check=float32_ops("Attention", "Split", forbids=("Softmax", "Einsum", "Transpose", "Reshape"), max_nodes=6)),
            Testcase("linen_mha_no_bias", factory=_mha(num_heads=3, qkv_features=6, out_features=4, use_bias=False),
                     input_shapes=[("B", 4, 6)], check=float32_ops("Attention", forbids=("Softmax", "Add"), max_nodes=4)),
            Testcase("linen_mha_causal", factory=applied(_Causal, (1, 4, 6), **_SIGNED), input_shapes=[(2, 4, 6)],
                     # the causal mask of a static length is a constant: folded into the additive mask
                     check=float32_ops("Attention", forbids=("Softmax", "Where"), max_nodes=6)),
            Testcase("linen_mha_padding_and_causal_mask", factory=applied(_Padded, (1, 4, 6), (1, 4), **_SIGNED),
                     input_shapes=[("B", 4, 6), ("B", 4)], input_generator=_valid,
                     check=float32_ops("Attention", "Where", forbids=("Softmax",))),
            Testcase("linen_mha_cross", factory=applied(_Cross, (1, 3, 6), (1, 5, 6), **_SIGNED),
                     input_shapes=[("B", 3, 6), ("B", 5, 6)],
                     check=float32_ops("Attention", forbids=("Softmax", "Transpose"), max_nodes=9)),
            Testcase("linen_self_attention",
                     factory=applied(lambda: nn.SelfAttention(num_heads=2, qkv_features=8), (1, 4, 6), **_SIGNED),
                     input_shapes=[("B", 4, 6)], check=float32_ops("Attention", forbids=("Softmax",), max_nodes=6)),
        ],
    ),
]

"""Testcases of :mod:`jax2onnx_nnx.attention` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import numpy as np
from flax import nnx
from jax2onnx.testing import Component, Testcase

from .helpers import model

_rngs = lambda: nnx.Rngs(0)  # noqa: E731


_SIGNED = {"low": -1.0, "high": 1.0}


def _mha(**kw):
    return model(lambda: nnx.MultiHeadAttention(decode=False, rngs=_rngs(), **kw), **_SIGNED)


class _CrossAttention(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.attn = nnx.MultiHeadAttention(num_heads=2, in_features=6, qkv_features=8, decode=False, rngs=rngs)

    def __call__(self, x, context):
        return self.attn(x, context)


class _MaskedSelfAttention(nnx.Module):
    """Self-attention with a padding mask built from a per-row valid length."""

    def __init__(self, rngs: nnx.Rngs):
        self.attn = nnx.MultiHeadAttention(num_heads=2, in_features=6, qkv_features=8, decode=False, rngs=rngs)

    def __call__(self, x, valid):
        mask = nnx.make_attention_mask(valid > 0, valid > 0)
        return self.attn(x, mask=mask)


def _dpa(**kw):
    return lambda q, k, v: nnx.dot_product_attention(q, k, v, **kw)


def _masked_dpa(q, k, v, mask):
    return nnx.dot_product_attention(q, k, v, mask=mask)


def _fully_masked_rows_defined() -> bool:
    """JAX < 0.7 returns NaN for a fully masked row under float64 (its large negative overflows to
    -inf in the float32 softmax); newer JAX, like the ONNX graph, gives the mean of the values."""
    return jax.__version_info__ >= (0, 7) or not jax.config.read("jax_enable_x64")


def _huge_masked_logits(rng, shape, dtype):
    """Queries/keys scaled so that logits reach ~1e3: masking must happen before the softmax."""
    if dtype == np.bool_:
        m = rng.random(shape) > 0.4
        m[..., 0] = True
        if _fully_masked_rows_defined():
            m[..., 0, :] = False  # a fully masked row
        return m
    return (rng.standard_normal(shape) * 30.0).astype(dtype)


def _valid_lengths(rng, shape, dtype):
    """Per-position validity for a padding mask: 0 marks padding (all-padding rows included)."""
    low = 0 if _fully_masked_rows_defined() else 1
    if np.issubdtype(dtype, np.integer):
        return rng.integers(low, 3, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


#: jax.nn.dot_product_attention (which flax calls) takes the softmax in float32 even for float64
#: inputs, so the float64 reference is only float32-precise; the ONNX graph keeps float64 throughout.
_F64_TOL = {"rtol_f64": 1e-6, "atol_f64": 1e-6}


_DPA = dict(expected_ops=["Attention"], forbidden_ops=["Softmax", "Einsum", "Transpose"], **_F64_TOL)


_BSHD = ("B", 5, 2, 4)


components = [
    Component(
        name="nnx.dot_product_attention",
        onnx=["Attention", "Reshape"],
        since="v0.1.0",
        testcases=[
            Testcase("dpa_basic", _dpa(), [_BSHD, _BSHD, _BSHD], max_nodes=5, **_DPA),
            Testcase("dpa_diff_heads_embed", _dpa(), [(1, 3, 4, 2)] * 3, **_DPA),
            Testcase("dpa_batch4_seq16", _dpa(), [(4, 16, 2, 4)] * 3, **_DPA),
            Testcase("dpa_float64", _dpa(), [(2, 4, 2, 3)] * 3, **_DPA),
            Testcase("dpa_heads1_embed4", _dpa(), [("B", 3, 1, 4)] * 3, **_DPA),
            Testcase("dpa_heads8_embed8", _dpa(), [(1, 4, 8, 8)] * 3, **_DPA),
            Testcase("dpa_batch1_seq2", _dpa(), [(1, 2, 2, 4)] * 3, **_DPA),
            Testcase("dpa_batch8_seq4", _dpa(), [(8, 4, 2, 4)] * 3, **_DPA),
            Testcase("dpa_axis1", _dpa(), [("B", 4, 3, 2)] * 3, **_DPA),
            Testcase("dpa_cross_lengths", _dpa(), [("B", 3, 2, 4), ("B", 6, 2, 4), ("B", 6, 2, 4)], **_DPA),
            Testcase("dpa_masked_huge_logits", _masked_dpa,
                     [("B", 4, 2, 3), ("B", 4, 2, 3), ("B", 4, 2, 3), jax.ShapeDtypeStruct(("B", 2, 4, 4), np.bool_)],
                     input_generator=_huge_masked_logits, expected_ops=["Attention", "Where"],
                     forbidden_ops=["Softmax", "Einsum", "Transpose"], **_F64_TOL),
            Testcase("dpa_bias", lambda q, k, v, b: nnx.dot_product_attention(q, k, v, bias=b),
                     [("B", 4, 2, 3), ("B", 5, 2, 3), ("B", 5, 2, 3), ("B", 2, 4, 5)], **_DPA),
        ],
    ),
    Component(
        name="nnx.multi_head_attention",
        onnx=["Attention", "MatMul", "Add", "Split"],
        since="v0.2.0",
        testcases=[
            Testcase("multihead_attention_nnx", factory=_mha(num_heads=2, in_features=6, qkv_features=8),
                     input_shapes=[("B", 5, 6)], expected_ops=["Attention", "Split"],
                     forbidden_ops=["Softmax", "Einsum", "Transpose", "Reshape"], max_nodes=6, **_F64_TOL),
            Testcase("multihead_attention_no_bias",
                     factory=_mha(num_heads=3, in_features=6, qkv_features=6, out_features=4, use_bias=False),
                     input_shapes=[("B", 4, 6)], expected_ops=["Attention"], forbidden_ops=["Softmax", "Add"],
                     max_nodes=4, **_F64_TOL),
            Testcase("multihead_attention_cross", factory=model(lambda: _CrossAttention(_rngs()), **_SIGNED),
                     input_shapes=[("B", 3, 6), ("B", 5, 6)], expected_ops=["Attention"],
                     forbidden_ops=["Softmax", "Transpose"], max_nodes=9, **_F64_TOL),
            Testcase("multihead_attention_masked", factory=model(lambda: _MaskedSelfAttention(_rngs()), **_SIGNED),
                     input_shapes=[("B", 4, 6), jax.ShapeDtypeStruct(("B", 4), np.int32)], input_generator=_valid_lengths,
                     expected_ops=["Attention", "Where"], forbidden_ops=["Softmax"], **_F64_TOL),
        ],
    ),
]

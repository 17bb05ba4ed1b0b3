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

import jax
import numpy as np
from flax import nnx
from flax.nnx.nn import attention as _flax_attention
from jax2onnx.fusion import (
    attention_inputs,
    lower_dot_product_attention,
    lower_multi_head_attention,
)
from jax2onnx.plugin import Lowerings, Patch, is_array, marked_call
from jax2onnx.testing import Component, Testcase

from ._fusion import call_module
from .cases.helpers import model

lowerings = Lowerings()

DOT_PRODUCT_ATTENTION = "jax2onnx_nnx.dot_product_attention"
MULTI_HEAD_ATTENTION = "jax2onnx_nnx.multi_head_attention"

#: flax's own attention function, taken before any patch: MultiHeadAttention fuses only with it.
FLAX_DOT_PRODUCT_ATTENTION = _flax_attention.dot_product_attention

#: Keyword arguments of ``dot_product_attention`` under which it is plain attention.
_DPA_NEUTRAL = {"broadcast_dropout": None, "dropout_rng": None, "dtype": None, "precision": None, "module": None}


def _no_dropout(rate: Any, deterministic: Any) -> bool:
    return float(rate) == 0.0 or deterministic is True


def _patch_dot_product_attention(original):
    def dot_product_attention(query, key, value, bias=None, mask=None, **kwargs):
        extra = {k: v for k, v in kwargs.items() if k not in ("dropout_rate", "deterministic", "is_causal")}
        is_causal = kwargs.get("is_causal", False)
        if (
            any(k not in _DPA_NEUTRAL or (v is not None and k not in ("broadcast_dropout", "dropout_rng"))
                for k, v in extra.items())
            or not _no_dropout(kwargs.get("dropout_rate", 0.0), kwargs.get("deterministic", False))
            or not all(is_array(a) for a in (query, key, value))
            or any(a is not None and not is_array(a) for a in (bias, mask))
            or not isinstance(is_causal, bool)
        ):
            return original(query, key, value, bias, mask, **kwargs)
        operands = {"q": query, "k": key, "v": value}
        if bias is not None:
            operands["bias"] = bias
        if mask is not None:
            operands["mask"] = mask

        def body(*arrays, operands, is_causal):
            named = dict(zip(operands, arrays, strict=True))
            return original(named["q"], named["k"], named["v"], named.get("bias"), named.get("mask"), **kwargs)

        return marked_call(DOT_PRODUCT_ATTENTION, body, *operands.values(), operands=tuple(operands),
                           is_causal=is_causal)

    return dot_product_attention


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
    Patch("flax.nnx", "dot_product_attention", _patch_dot_product_attention),
    Patch("flax.nnx.MultiHeadAttention", "__call__", _patch_multi_head_attention),
]


# ---------------------------------------------------------------------------------------------
# Lowerings: the kit's (operands q/k/v/mask/bias and query/key/value/out kernels, as flax names them)

lowerings.add(f"call:{DOT_PRODUCT_ATTENTION}", lower_dot_product_attention)
lowerings.add(f"call:{MULTI_HEAD_ATTENTION}", lower_multi_head_attention)


# ---------------------------------------------------------------------------------------------
# Testcases

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

"""Testcases of :mod:`jax2onnx_eqx.attention` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.testing import Component, Testcase

from ._testing import float32_ops, model


def _mha(wrap, **kw):
    return model(lambda k: eqx.nn.MultiheadAttention(2, 6, key=k, **kw), wrap=wrap)


def _self(m):
    return lambda x: m(x, x, x)


def _self_masked(m):
    """Self-attention with a causal mask (a constant, folded into the additive mask)."""

    def run(x):
        n = x.shape[0]
        return m(x, x, x, mask=jnp.tril(jnp.ones((n, n), dtype=bool)))

    return run


def _self_padding(m):
    """A padding mask from per-position validity: rows of padding are fully masked."""
    return lambda x, valid: m(x, x, x, mask=(valid[:, None] > 0) & (valid[None, :] > 0))


def _valid(rng, shape, dtype):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(0, 3, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _cross(m):
    return lambda x, ctx: m(x, ctx, ctx)


components = [
    Component(
        name="eqx.multihead_attention",
        onnx=["Attention", "MatMul", "Split", "Unsqueeze", "Squeeze"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_mha_self", factory=_mha(wrap=_self), input_shapes=[(5, 6)],
                     check=float32_ops("Attention", "Split", forbids=("Softmax", "Einsum"), max_nodes=6)),
            Testcase("eqx_mha_self_bias",
                     factory=_mha(use_query_bias=True, use_key_bias=True, use_value_bias=True, use_output_bias=True,
                                  wrap=_self),
                     input_shapes=[(4, 6)], check=float32_ops("Attention", forbids=("Softmax",), max_nodes=8)),
            Testcase("eqx_mha_causal", factory=_mha(wrap=_self_masked), input_shapes=[(4, 6)],
                     check=float32_ops("Attention", forbids=("Softmax",), max_nodes=6)),
            Testcase("eqx_mha_padding_mask", factory=_mha(wrap=_self_padding),
                     input_shapes=[(4, 6), jax.ShapeDtypeStruct((4,), np.int32)], input_generator=_valid,
                     check=float32_ops("Attention", "Where", forbids=("Softmax",))),
            Testcase("eqx_mha_cross", factory=model(lambda k: eqx.nn.MultiheadAttention(2, 6, 4, 4, 5, key=k),
                                                    wrap=_cross),
                     input_shapes=[(3, 6), (5, 4)], check=float32_ops("Attention", forbids=("Softmax",))),
            # Batched with jax.vmap(mha), as equinox code does: the same fused graph, batch in front.
            Testcase("eqx_mha_vmapped", factory=_mha(wrap=lambda m: lambda x: jax.vmap(m)(x, x, x)),
                     input_shapes=[("B", 4, 6)],
                     check=float32_ops("Attention", "Split", forbids=("Softmax", "Einsum"), max_nodes=4)),
            Testcase("eqx_mha_vmapped_padding_mask",
                     factory=_mha(wrap=lambda m: lambda x, valid: jax.vmap(m)(
                         x, x, x, (valid[:, :, None] > 0) & (valid[:, None, :] > 0))),
                     input_shapes=[("B", 4, 6), jax.ShapeDtypeStruct(("B", 4), np.int32)], input_generator=_valid,
                     check=float32_ops("Attention", "Where", forbids=("Softmax",))),
            # A vmapped function calling the module: its region is built outside the vmap, as for jax.vmap(mha).
            Testcase("eqx_mha_inside_vmapped_fn", factory=_mha(wrap=lambda m: jax.vmap(_self(m))),
                     input_shapes=[("B", 4, 6)],
                     check=float32_ops("Attention", "Split", forbids=("Softmax", "Einsum", "Unsqueeze"), max_nodes=4)),
            # The causal mask made inside the vmapped function is not batched: it is broadcast over the
            # batch (folded for a static batch; Shape/Concat/Expand of the constant for a symbolic one).
            Testcase("eqx_mha_inside_vmapped_fn_causal", factory=_mha(wrap=lambda m: jax.vmap(_self_masked(m))),
                     input_shapes=[("B", 4, 6)], check=float32_ops("Attention", forbids=("Softmax",), max_nodes=9)),
        ],
    ),
]

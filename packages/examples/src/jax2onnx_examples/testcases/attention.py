"""MultiHeadAttention example: ``nnx.MultiHeadAttention`` with JAX's and Flax's attention kernels."""

from __future__ import annotations

from typing import Any

import jax
from flax import nnx
from jax2onnx.testing import Component, Testcase

from ._common import small_normal_init


def jax_nn_attention(query: jax.Array, key: jax.Array, value: jax.Array, mask: Any = None, **_: Any) -> jax.Array:
    """``jax.nn.dot_product_attention`` behind Flax's ``attention_fn`` signature (dropout args unused)."""
    return jax.nn.dot_product_attention(query, key, value, mask=mask)


def _mha(attention_fn: Any) -> Any:
    def build() -> nnx.MultiHeadAttention:
        return nnx.MultiHeadAttention(
            num_heads=2,
            in_features=16,
            qkv_features=16,
            out_features=16,
            kernel_init=small_normal_init,
            attention_fn=attention_fn,
            dropout_rate=0.0,
            decode=False,
            rngs=nnx.Rngs(0),
        )

    return build


# Flax's and jax.nn's attention compute the softmax in float32 even under x64, so float64 variants
# compare at float32-rounding level there.
F64_TOL = {"rtol_f64": 1e-6, "atol_f64": 1e-6}

components = [
    Component(
        name="MultiHeadAttention",
        kind="example",
        description=(
            "This is a multi-head attention module implemented by Flax/nnx that has no ONNX correspondent "
            "on the same granularity."
        ),
        onnx=["MatMul", "Einsum", "Softmax", "Add"],
        since="v0.2.0",
        testcases=[
            # attention kernel: jax.nn.dot_product_attention
            Testcase("multihead_attention_nn", factory=_mha(jax_nn_attention), input_shapes=[("B", 4, 16)], **F64_TOL),
            # attention kernel: Flax's own nnx.dot_product_attention (the module's default), passed
            # explicitly: the layer still fuses whole
            Testcase("multihead_attention_nnx", factory=_mha(nnx.dot_product_attention), input_shapes=[("B", 4, 16)],
                     expected_ops=["Attention"], forbidden_ops=["Softmax"], max_nodes=6, **F64_TOL),
        ],
    )
]

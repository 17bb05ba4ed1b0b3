"""ONNX-function examples 007–013: transformer blocks, stacks and a ViT whose parts are
``@onnx_function``s (the ViT blocks of ``vit_models``, subclassed and decorated).

The checks count functions: blocks with their own weights give one function each, while the
weight-free ``attention`` kernel has the same body in every block and is shared.
"""

from __future__ import annotations

from typing import Any

import jax
from flax import nnx
from jax2onnx import onnx_function
from jax2onnx.testing import Component, Testcase

from . import vit_models as vm
from .helpers import all_of, expect_bool_input, expect_functions

HIDDEN, HEADS, MLP_DIM, LAYERS = 16, 2, 32, 2
SEQ_SHAPE = ("B", 5, HIDDEN)
IMAGE_SHAPE = ("B", 28, 28, 1)
# float64 variants: the attention softmax runs in float32 inside Flax even under x64
DEEP = {"rtol": 1e-3, "atol": 1e-4, "rtol_f64": 1e-6, "atol_f64": 1e-6}


@onnx_function(name="FeedForward")
class FeedForwardFn(vm.FeedForward):
    """The MLP block as a function; ``deterministic`` is a call parameter."""


@onnx_function(name="FeedForward")
class FeedForwardNoParam(vm.FeedForward):
    """The MLP block as a function without call parameters (always deterministic)."""

    def __call__(self, x: jax.Array) -> jax.Array:
        return super().__call__(x, deterministic=True)


@onnx_function(name="attention")
def attention(query: jax.Array, key: jax.Array, value: jax.Array) -> jax.Array:
    """Flax's attention kernel as a function of q, k, v only (no weights: shared by every block)."""
    return nnx.dot_product_attention(query, key, value)


def _attention_kernel(query: jax.Array, key: jax.Array, value: jax.Array, *_: Any, **__: Any) -> jax.Array:
    # Flax passes mask/dropout/dtype keywords; the examples use none of them.
    return attention(query, key, value)


@onnx_function(name="MultiHeadAttention")
class AttentionFn(vm.Attention):
    def __init__(self, num_hiddens: int, num_heads: int, dropout_rate: float = 0.1, *, rngs: nnx.Rngs):
        super().__init__(num_hiddens, num_heads, dropout_rate, attention_fn=_attention_kernel, rngs=rngs)


@onnx_function(name="TransformerBlock")
class Block007(vm.TransformerBlock):
    """007: the block and its MLP are functions; the block passes ``deterministic`` on."""

    feed_forward_cls = FeedForwardFn


class _BlockMlpWithoutParam(vm.TransformerBlock):
    # Undecorated base: subclassing a decorated class would wrap its call twice (a function in a function).
    feed_forward_cls = FeedForwardNoParam

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        x = x + self.attention(self.layer_norm1(x), deterministic=deterministic)
        return x + self.mlp_block(self.layer_norm2(x))


@onnx_function(name="TransformerBlock")
class Block008(_BlockMlpWithoutParam):
    """008: the MLP function is called without parameters."""


@onnx_function(name="TransformerBlock")
class Block009(_BlockMlpWithoutParam):
    """009: attention module and attention kernel (a decorated function) are functions too."""

    attention_cls = AttentionFn


@onnx_function(name="TransformerBlock")
class Block013(vm.TransformerBlock):
    """013: every function takes ``deterministic`` from its caller."""

    attention_cls = AttentionFn
    feed_forward_cls = FeedForwardFn


@onnx_function(name="TransformerStack")
class Stack010(vm.TransformerStack):
    block_cls = Block009


@onnx_function(name="TransformerStack")
class Stack013(vm.TransformerStack):
    block_cls = Block013


# vit_models' blocks, each exported as the ONNX function named like it
ConvEmbeddingFn = onnx_function(name="ConvEmbedding")(vm.variant(vm.ConvEmbedding, "Fn", __name__))
ConcatClsTokenFn = onnx_function(name="ConcatClsToken")(vm.variant(vm.ConcatClsToken, "Fn", __name__))
PositionalEmbeddingFn = onnx_function(name="PositionalEmbedding")(vm.variant(vm.PositionalEmbedding, "Fn", __name__))
ClassificationHeadFn = onnx_function(name="ClassificationHead")(vm.variant(vm.ClassificationHead, "Fn", __name__))


class _ViTOfFunctions(vm.VisionTransformer):
    conv_embedding_cls = ConvEmbeddingFn
    concat_cls_token_cls = ConcatClsTokenFn
    positional_embedding_cls = PositionalEmbeddingFn
    head_cls = ClassificationHeadFn


@onnx_function(name="VisionTransformer")
class ViT012(_ViTOfFunctions):
    stack_cls = Stack010


@onnx_function(name="VisionTransformer")
class ViT013(_ViTOfFunctions):
    stack_cls = Stack013


def _block(cls: type) -> Any:
    return lambda: cls(HIDDEN, HEADS, MLP_DIM, rngs=nnx.Rngs(0))


def _stack(cls: type) -> Any:
    return lambda: cls(HIDDEN, HEADS, MLP_DIM, LAYERS, rngs=nnx.Rngs(0))


def _vit(cls: type) -> Any:
    return lambda: cls(num_hiddens=HIDDEN, num_layers=LAYERS, num_heads=HEADS, mlp_dim=MLP_DIM, rngs=nnx.Rngs(0))


def _example(number: str, description: str, *cases: Testcase) -> Component:
    return Component(f"onnx_functions_{number}", onnx=["Function"], testcases=list(cases), since="v0.4.0",
                     description=description, kind="example")


BLOCK_AND_MLP = expect_functions({"TransformerBlock": 1, "FeedForward": 1}, {"TransformerBlock": 1, "FeedForward": 1})
# Per block: its own MultiHeadAttention and FeedForward (own weights); the attention kernel is shared.
STACK = {"TransformerStack": 1, "TransformerBlock": LAYERS, "MultiHeadAttention": LAYERS, "attention": 1, "FeedForward": LAYERS}
STACK_CALLS = {**STACK, "attention": LAYERS}
VIT_PARTS = {"VisionTransformer": 1, "ConvEmbedding": 1, "ConcatClsToken": 1, "PositionalEmbedding": 1, "ClassificationHead": 1}
VIT = expect_functions({**STACK, **VIT_PARTS}, {**STACK_CALLS, **VIT_PARTS})

components = [
    _example("007", "transformer block with nested mlp block with call parameter",
             Testcase("007_transformer_block", factory=_block(Block007), input_shapes=[SEQ_SHAPE], check=BLOCK_AND_MLP, **DEEP)),
    _example("008", "transformer block with nested mlp block no call parameter",
             Testcase("008_transformer_block", factory=_block(Block008), input_shapes=[SEQ_SHAPE], check=BLOCK_AND_MLP, **DEEP)),
    _example("009", "transformer block using decorator on class and function",
             Testcase("009_transformer_block", factory=_block(Block009), input_shapes=[SEQ_SHAPE], **DEEP,
                      check=expect_functions(
                          {"TransformerBlock": 1, "MultiHeadAttention": 1, "attention": 1, "FeedForward": 1},
                          {"TransformerBlock": 1, "MultiHeadAttention": 1, "attention": 1, "FeedForward": 1},
                      ))),
    _example("010", "transformer stack",
             Testcase("010_transformer_stack", factory=_stack(Stack010), input_shapes=[SEQ_SHAPE],
                      check=expect_functions(STACK, STACK_CALLS), **DEEP)),
    _example("012", "Vision Transformer (ViT)",
             Testcase("012_vit_conv_embedding", factory=_vit(ViT012), input_shapes=[IMAGE_SHAPE], check=VIT, **DEEP)),
    _example(
        "013", "Vision Transformer (ViT)",
        # `deterministic` as a runtime input of the graph, passed into every function
        Testcase("013_vit_conv_embedding_with_call_params", factory=_vit(ViT013), input_shapes=[IMAGE_SHAPE],
                 input_params={"deterministic": True},
                 check=all_of(VIT, expect_bool_input("deterministic")), **DEEP),
        # the same model with `deterministic` left at its Python default inside the graph
        Testcase("013_vit_conv_embedding_with_internal_call_params", factory=_vit(ViT013), input_shapes=[IMAGE_SHAPE],
                 check=VIT, **DEEP),
    ),
]

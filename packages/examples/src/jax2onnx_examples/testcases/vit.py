"""Vision Transformer examples: each building block of ``vit_models`` as its own component."""

from __future__ import annotations

from typing import Any

from flax import nnx
from jax2onnx.testing import Component, Testcase

from . import vit_models as vm

SEQ_SHAPE = ("B", 5, 16)  # (batch, tokens, num_hiddens) for the sequence blocks
IMAGE_SHAPE = ("B", 28, 28, 1)
# Deep float32 graphs (attention, LayerNorm, many Dense layers) accumulate rounding differently
# in XLA and onnxruntime; float64 variants keep the tight default tolerance.
# Attention softmax runs in float32 even under x64 (Flax's and jax.nn's attention cast to float32
# for it), so float64 variants of blocks with attention compare at float32-rounding level.
DEEP = {"rtol": 1e-3, "atol": 1e-4, "rtol_f64": 1e-6, "atol_f64": 1e-6}
CONV_STACK = {"rtol": 1e-3, "atol": 1e-4}  # three convolutions + LayerNorm: float32 rounding only
#: float64 convolutions take the lax decomposition (onnxruntime has no double Conv kernel).
CONV = {"expected_ops": ["Conv"], "expected_ops_f64": ()}


def block_components(m: Any, suffix: str, case_suffix: str) -> list[Component]:
    """Components for the block classes in namespace ``m`` (plain or flattened variants)."""

    def rngs() -> nnx.Rngs:
        return nnx.Rngs(0)

    def comp(name: str, description: str, onnx: list[str], since: str, *cases: Testcase) -> Component:
        return Component(name + suffix, onnx=onnx, testcases=list(cases), since=since, description=description, kind="example")

    def case(name: str, **kw: Any) -> Testcase:
        return Testcase(name + case_suffix, **kw)

    def vit(embedding_type: str) -> Any:
        return lambda: m.VisionTransformer(embedding_type=embedding_type, rngs=rngs())

    return [
        comp("ClassificationHead", "Classification head for Vision Transformer", ["LayerNormalization", "Gemm", "LogSoftmax"], "v0.4.0",
             case("classification_head", factory=lambda: m.ClassificationHead(16, 10, rngs=rngs()), input_shapes=[SEQ_SHAPE])),
        comp("ConcatClsToken", "Concatenate CLS token to the input embedding", ["Tile", "Expand", "Concat"], "v0.4.0",
             case("concat_cls_token", factory=lambda: m.ConcatClsToken(16, rngs=rngs()), input_shapes=[SEQ_SHAPE],
                  expected_ops=["Concat"])),
        comp("ConvEmbedding", "Convolutional Token Embedding for MNIST with hierarchical downsampling.",
             ["Conv", "Gelu", "LayerNormalization", "Reshape"], "v0.1.0",
             case("mnist_conv_embedding", factory=lambda: m.ConvEmbedding(rngs=rngs()), input_shapes=[IMAGE_SHAPE],
                  **CONV, **CONV_STACK)),
        comp("FeedForward", "MLP in Transformer", ["Gemm", "MatMul", "Gelu"], "v0.1.0",
             case("feed_forward", factory=lambda: m.FeedForward(16, 32, rngs=rngs()), input_shapes=[SEQ_SHAPE])),
        comp("GetToken", "Get the CLS token from the input embedding", ["Gather", "Slice", "Squeeze"], "v0.4.0",
             case("get_token", callable=m.get_token_fn, input_shapes=[SEQ_SHAPE])),
        comp("PatchEmbedding", "Cutting the image into patches and linearly embedding them.",
             ["Reshape", "Transpose", "Gemm", "MatMul"], "v0.1.0",
             case("patch_embedding", factory=lambda: m.PatchEmbedding(28, 28, 4, 16, 1, rngs=rngs()),
                  input_shapes=[IMAGE_SHAPE], expected_ops=["Transpose"])),
        comp("PositionalEmbedding", "Add positional embedding to the input embedding", ["Add"], "v0.4.0",
             case("positional_embedding", factory=lambda: m.PositionalEmbedding(4, 16), input_shapes=[SEQ_SHAPE])),
        comp("TransformerBlock", "Transformer from 'Attention Is All You Need.'",
             ["LayerNormalization", "MatMul", "Softmax", "Gelu", "Add"], "v0.1.0",
             case("transformer_block", factory=lambda: m.TransformerBlock(16, 2, 32, rngs=rngs()),
                  input_shapes=[SEQ_SHAPE], **DEEP)),
        comp("TransformerStack", "Stack of Transformer blocks", ["LayerNormalization", "MatMul", "Softmax", "Gelu", "Add"], "v0.1.0",
             case("transformer_stack", factory=lambda: m.TransformerStack(16, 2, 32, 2, rngs=rngs()),
                  input_shapes=[SEQ_SHAPE], **DEEP)),
        comp("VisionTransformer", "A Vision Transformer (ViT) model for MNIST with configurable embedding type.",
             ["Conv", "LayerNormalization", "MatMul", "Softmax", "Gelu", "LogSoftmax"], "v0.2.0",
             case("vit_conv_embedding", factory=vit("conv"), input_shapes=[IMAGE_SHAPE], **CONV, **DEEP),
             case("vit_patch_embedding", factory=vit("patch"), input_shapes=[IMAGE_SHAPE], **DEEP)),
    ]


class _Plain:
    """The plain blocks, plus GetToken as a function of one input."""

    ClassificationHead = vm.ClassificationHead
    ConcatClsToken = vm.ConcatClsToken
    ConvEmbedding = vm.ConvEmbedding
    FeedForward = vm.FeedForward
    PatchEmbedding = vm.PatchEmbedding
    PositionalEmbedding = vm.PositionalEmbedding
    TransformerBlock = vm.TransformerBlock
    TransformerStack = vm.TransformerStack
    VisionTransformer = vm.VisionTransformer

    @staticmethod
    def get_token_fn(x: Any) -> Any:
        return vm.get_token(x, 0)


components = block_components(_Plain, "", "")

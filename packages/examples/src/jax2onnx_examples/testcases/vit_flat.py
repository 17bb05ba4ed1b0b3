"""The ``*Flatten`` Vision Transformer examples: the same blocks written on 2-D views (see vit_models)."""

from __future__ import annotations

from typing import Any

from . import vit_models as vm
from .vit import block_components


def _flat(base: type) -> type:
    """``base`` with ``flatten`` set: the same block on 2-D views, named ``<base>Flat``."""
    return vm.variant(base, "Flat", __name__, flatten=True)


PatchEmbeddingFlat = _flat(vm.PatchEmbedding)
ConvEmbeddingFlat = _flat(vm.ConvEmbedding)
FeedForwardFlat = _flat(vm.FeedForward)
ConcatClsTokenFlat = _flat(vm.ConcatClsToken)
PositionalEmbeddingFlat = _flat(vm.PositionalEmbedding)
ClassificationHeadFlat = _flat(vm.ClassificationHead)


class TransformerBlockFlat(vm.TransformerBlock):
    feed_forward_cls = FeedForwardFlat


class TransformerStackFlat(vm.TransformerStack):
    block_cls = TransformerBlockFlat


class VisionTransformerFlat(vm.VisionTransformer):
    conv_embedding_cls = ConvEmbeddingFlat
    patch_embedding_cls = PatchEmbeddingFlat
    concat_cls_token_cls = ConcatClsTokenFlat
    positional_embedding_cls = PositionalEmbeddingFlat
    stack_cls = TransformerStackFlat
    head_cls = ClassificationHeadFlat


class _Flat:
    ClassificationHead = ClassificationHeadFlat
    ConcatClsToken = ConcatClsTokenFlat
    ConvEmbedding = ConvEmbeddingFlat
    FeedForward = FeedForwardFlat
    PatchEmbedding = PatchEmbeddingFlat
    PositionalEmbedding = PositionalEmbeddingFlat
    TransformerBlock = TransformerBlockFlat
    TransformerStack = TransformerStackFlat
    VisionTransformer = VisionTransformerFlat

    @staticmethod
    def get_token_fn(x: Any) -> Any:
        return vm.get_token_by_slice(x, 0)


components = block_components(_Flat, "Flatten", "_flat")

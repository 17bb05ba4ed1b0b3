"""Vision Transformer building blocks for MNIST-sized (28x28x1) images.

Each block has a class attribute ``flatten``: the ``*Flatten`` variants (``vit_flat.py``) set it,
and then the model code itself works on 2-D views (Dense layers on ``(N, features)``, LayerNorm on
flattened feature maps, the CLS token taken by slicing) so the exported graph takes other routes
(Reshape → Gemm → Reshape, Slice → Squeeze) than the plain blocks. Sub-block classes are class
attributes too, so ``onnx_functions_*`` examples can swap in ``@onnx_function`` subclasses.

Sizes are small on purpose (tests run every block in four variants).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import jax
import jax.numpy as jnp
from flax import nnx

from ._common import gelu_exact, module_list, sinusoidal_embeddings


def variant(base: type, suffix: str, module: str, **attrs: Any) -> type:
    """A block variant: ``base`` subclassed as ``<base name><suffix>`` in ``module`` with class
    attributes ``attrs`` (``vit_flat``'s flattened blocks, the function-wrapped ones)."""
    cls = type(f"{base.__name__}{suffix}", (base,), {"__module__": module, **attrs})
    cls.__qualname__ = cls.__name__
    return cls


def dense(layer: nnx.Linear, x: jax.Array, flatten: bool) -> jax.Array:
    """Apply ``layer``; with ``flatten``, on a 2-D view ``(N, in)`` and reshape back afterwards."""
    if not flatten or x.ndim == 2:
        return layer(x)
    lead = x.shape[:-1]
    y = layer(x.reshape(-1, x.shape[-1]))
    return y.reshape(*lead, y.shape[-1])


def get_token(x: jax.Array, index: int = 0) -> jax.Array:
    """Token ``index`` of a (B, T, H) sequence, by integer indexing."""
    return x[:, index, :]


def get_token_by_slice(x: jax.Array, index: int = 0) -> jax.Array:
    """The same as :func:`get_token`, written as a length-1 slice and a squeeze."""
    return jnp.squeeze(x[:, index : index + 1, :], axis=1)


class PatchEmbedding(nnx.Module):
    """Cut the image into ``patch_size`` squares and embed each with one Dense layer."""

    flatten: ClassVar[bool] = False

    def __init__(self, height: int, width: int, patch_size: int, num_hiddens: int, in_features: int, *, rngs: nnx.Rngs):
        self.grid = (height // patch_size, width // patch_size)
        self.patch_size = patch_size
        self.in_features = in_features
        self.linear = nnx.Linear(patch_size * patch_size * in_features, num_hiddens, rngs=rngs)

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        gh, gw = self.grid
        p = self.patch_size
        batch = x.shape[0]
        x = x.reshape(batch, gh, p, gw, p, self.in_features)
        x = x.transpose((0, 1, 3, 2, 4, 5))
        x = x.reshape(batch, gh * gw, p * p * self.in_features)
        return dense(self.linear, x, self.flatten)


class ConvEmbedding(nnx.Module):
    """Three SAME-padded convolutions (strides 1, 2, 2: 28→7) with GELU, LayerNorm over the whole
    feature map, dropout, then the 7x7 positions as tokens."""

    flatten: ClassVar[bool] = False

    def __init__(
        self,
        W: int = 28,
        H: int = 28,
        embed_dims: Sequence[int] = (4, 8, 16),
        kernel_size: int = 3,
        strides: Sequence[int] = (1, 2, 2),
        dropout_rate: float = 0.5,
        *,
        rngs: nnx.Rngs,
    ):
        chans = [1, *embed_dims]
        self.convs = module_list(
            nnx.Conv(chans[i], chans[i + 1], kernel_size=(kernel_size, kernel_size), strides=(s, s), padding="SAME", rngs=rngs)
            for i, s in enumerate(strides)
        )
        features = embed_dims[-1] * (W // 4) * (H // 4)
        if self.flatten:
            self.layer_norm = nnx.LayerNorm(features, rngs=rngs)
        else:
            self.layer_norm = nnx.LayerNorm(features, reduction_axes=(1, 2, 3), feature_axes=(1, 2, 3), rngs=rngs)
        self.dropout = nnx.Dropout(rate=dropout_rate, rngs=rngs)

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        for conv in self.convs:
            x = gelu_exact(conv(x))
        b, h, w, c = x.shape
        if self.flatten:
            x = self.layer_norm(x.reshape(b, h * w * c)).reshape(b, h, w, c)
        else:
            x = self.layer_norm(x)
        x = self.dropout(x, deterministic=deterministic)
        return x.reshape(b, h * w, c)


class FeedForward(nnx.Module):
    """The transformer's MLP: Dense → GELU → Dropout → Dense → Dropout."""

    flatten: ClassVar[bool] = False

    def __init__(self, num_hiddens: int, mlp_dim: int, dropout_rate: float = 0.1, *, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(num_hiddens, mlp_dim, rngs=rngs)
        self.dropout1 = nnx.Dropout(rate=dropout_rate, rngs=rngs)
        self.linear2 = nnx.Linear(mlp_dim, num_hiddens, rngs=rngs)
        self.dropout2 = nnx.Dropout(rate=dropout_rate, rngs=rngs)

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        x = gelu_exact(dense(self.linear1, x, self.flatten))
        x = self.dropout1(x, deterministic=deterministic)
        x = dense(self.linear2, x, self.flatten)
        return self.dropout2(x, deterministic=deterministic)


class Attention(nnx.Module):
    """Self-attention (``nnx.MultiHeadAttention``) followed by dropout."""

    def __init__(self, num_hiddens: int, num_heads: int, dropout_rate: float = 0.1, *, attention_fn: Any = None, rngs: nnx.Rngs):
        extra = {} if attention_fn is None else {"attention_fn": attention_fn}
        self.attention = nnx.MultiHeadAttention(
            num_heads=num_heads,
            in_features=num_hiddens,
            qkv_features=num_hiddens,
            out_features=num_hiddens,
            decode=False,
            rngs=rngs,
            **extra,
        )
        self.dropout = nnx.Dropout(rate=dropout_rate, rngs=rngs)

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        # The attention weights have no dropout (rate 0), so the module gets a static flag; only our
        # dropout sees `deterministic`, which may be a runtime input.
        x = self.attention(x, deterministic=True)
        return self.dropout(x, deterministic=deterministic)


class TransformerBlock(nnx.Module):
    """Pre-LayerNorm transformer encoder block with residual connections."""

    attention_cls: ClassVar[type] = Attention
    feed_forward_cls: ClassVar[type] = FeedForward

    def __init__(
        self,
        num_hiddens: int,
        num_heads: int,
        mlp_dim: int,
        attention_dropout_rate: float = 0.1,
        mlp_dropout_rate: float = 0.1,
        *,
        rngs: nnx.Rngs,
    ):
        self.layer_norm1 = nnx.LayerNorm(num_hiddens, rngs=rngs)
        self.attention = self.attention_cls(num_hiddens, num_heads, attention_dropout_rate, rngs=rngs)
        self.layer_norm2 = nnx.LayerNorm(num_hiddens, rngs=rngs)
        self.mlp_block = self.feed_forward_cls(num_hiddens, mlp_dim, mlp_dropout_rate, rngs=rngs)

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        x = x + self.attention(self.layer_norm1(x), deterministic=deterministic)
        return x + self.mlp_block(self.layer_norm2(x), deterministic=deterministic)


class TransformerStack(nnx.Module):
    """``num_layers`` transformer blocks (each with its own weights)."""

    block_cls: ClassVar[type] = TransformerBlock

    def __init__(
        self,
        num_hiddens: int,
        num_heads: int,
        mlp_dim: int,
        num_layers: int,
        attention_dropout_rate: float = 0.1,
        mlp_dropout_rate: float = 0.1,
        *,
        rngs: nnx.Rngs,
    ):
        self.blocks = module_list(
            self.block_cls(num_hiddens, num_heads, mlp_dim, attention_dropout_rate, mlp_dropout_rate, rngs=rngs)
            for _ in range(num_layers)
        )

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        for block in self.blocks:
            x = block(x, deterministic=deterministic)
        return x


class ConcatClsToken(nnx.Module):
    """Prepend a learned CLS token to every sequence of the batch."""

    flatten: ClassVar[bool] = False

    def __init__(self, num_hiddens: int, *, rngs: nnx.Rngs):
        self.cls_token = nnx.Param(jax.random.normal(rngs.params(), (1, 1, num_hiddens)))

    def __call__(self, x: jax.Array) -> jax.Array:
        cls = self.cls_token[...].astype(x.dtype)
        if self.flatten:
            tokens = jnp.broadcast_to(cls, (x.shape[0], 1, x.shape[2]))
        else:
            tokens = jnp.tile(cls, (x.shape[0], 1, 1))
        return jnp.concatenate([tokens, x], axis=1)


class PositionalEmbedding(nnx.Module):
    """Add a fixed sinusoidal position table (CLS position included)."""

    flatten: ClassVar[bool] = False

    def __init__(self, num_patches: int, num_hiddens: int):
        self.positional_embedding = nnx.Param(sinusoidal_embeddings(num_patches + 1, num_hiddens))

    def __call__(self, x: jax.Array) -> jax.Array:
        table = self.positional_embedding[...].astype(x.dtype)
        if self.flatten:
            b, t, h = x.shape
            return (x.reshape(b, t * h) + table.reshape(1, t * h)).reshape(b, t, h)
        return x + table


class ClassificationHead(nnx.Module):
    """LayerNorm, take the CLS token, Dense to class logits, log-softmax."""

    flatten: ClassVar[bool] = False

    def __init__(self, num_hiddens: int, num_classes: int, *, rngs: nnx.Rngs):
        self.layer_norm = nnx.LayerNorm(num_features=num_hiddens, rngs=rngs)
        self.dense = nnx.Linear(num_hiddens, num_classes, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        if self.flatten:
            x = self.layer_norm(get_token_by_slice(x, 0))
        else:
            x = get_token(self.layer_norm(x), 0)
        return nnx.log_softmax(self.dense(x))


class VisionTransformer(nnx.Module):
    """ViT for MNIST: conv or patch embedding, CLS token, positions, transformer stack, head."""

    conv_embedding_cls: ClassVar[type] = ConvEmbedding
    patch_embedding_cls: ClassVar[type] = PatchEmbedding
    concat_cls_token_cls: ClassVar[type] = ConcatClsToken
    positional_embedding_cls: ClassVar[type] = PositionalEmbedding
    stack_cls: ClassVar[type] = TransformerStack
    head_cls: ClassVar[type] = ClassificationHead

    def __init__(
        self,
        height: int = 28,
        width: int = 28,
        num_hiddens: int = 16,
        num_layers: int = 2,
        num_heads: int = 2,
        mlp_dim: int = 32,
        num_classes: int = 10,
        embed_dims: Sequence[int] = (4, 8, 16),
        kernel_size: int = 3,
        strides: Sequence[int] = (1, 2, 2),
        patch_size: int = 4,
        embedding_type: str = "conv",
        embedding_dropout_rate: float = 0.1,
        attention_dropout_rate: float = 0.1,
        mlp_dropout_rate: float = 0.1,
        *,
        rngs: nnx.Rngs,
    ):
        if embedding_type == "conv":
            if len(embed_dims) != 3 or embed_dims[2] != num_hiddens:
                raise ValueError("embed_dims must have 3 entries, the last equal to num_hiddens")
            self.embedding = self.conv_embedding_cls(
                width, height, embed_dims, kernel_size, strides, embedding_dropout_rate, rngs=rngs
            )
            num_patches = (height // 4) * (width // 4)
        elif embedding_type == "patch":
            self.embedding = self.patch_embedding_cls(height, width, patch_size, num_hiddens, 1, rngs=rngs)
            num_patches = (height // patch_size) * (width // patch_size)
        else:
            raise ValueError(f"embedding_type must be 'conv' or 'patch', got {embedding_type!r}")
        self.concat_cls_token = self.concat_cls_token_cls(num_hiddens, rngs=rngs)
        self.positional_embedding = self.positional_embedding_cls(num_patches, num_hiddens)
        self.transformer_stack = self.stack_cls(
            num_hiddens, num_heads, mlp_dim, num_layers, attention_dropout_rate, mlp_dropout_rate, rngs=rngs
        )
        self.classification_head = self.head_cls(num_hiddens, num_classes, rngs=rngs)

    def __call__(self, x: jax.Array, deterministic: Any = True) -> jax.Array:
        x = self.embedding(x, deterministic=deterministic)
        x = self.concat_cls_token(x)
        x = self.positional_embedding(x)
        x = self.transformer_stack(x, deterministic=deterministic)
        return self.classification_head(x)

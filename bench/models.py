"""Benchmark models, importable by both converters' environments.

Plain Flax NNX + JAX only: nothing from our packs (the peer's venv has only jax2onnx 0.17.1 from
PyPI, which shares the import name). Every model is deterministic (``nnx.Rngs(0)``) and, where it
matters, in eval mode, so that the worker process (conversion) and the comparing process (JAX
reference) build the same weights independently.

    spec = MODELS["mlp"]
    fn = spec.build()                      # an nnx.Module or a function
    shapes = spec.input_shapes             # ("B", 30) style, with dtypes in spec.input_dtypes
    arrays = make_inputs(spec, batch=8, seed=0, case="random")
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx


@contextlib.contextmanager
def x64(enabled: bool) -> Iterator[None]:
    """Turn ``jax_enable_x64`` on for the block (a no-op when not asked), always restoring it."""
    previous = bool(jax.config.read("jax_enable_x64"))
    if enabled != previous:
        jax.config.update("jax_enable_x64", enabled)
    try:
        yield
    finally:
        if enabled != previous:
            jax.config.update("jax_enable_x64", previous)


# --------------------------------------------------------------------------------------------- models


class MLP(nnx.Module):
    """The seed README's quickstart model."""

    def __init__(self, din: int, dmid: int, dout: int, *, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(din, dmid, rngs=rngs)
        self.dropout = nnx.Dropout(rate=0.1, rngs=rngs)
        self.bn = nnx.BatchNorm(dmid, rngs=rngs)
        self.linear2 = nnx.Linear(dmid, dout, rngs=rngs)

    def __call__(self, x):
        x = nnx.gelu(self.dropout(self.bn(self.linear1(x))))
        return self.linear2(x)


class TransformerLayer(nnx.Module):
    """Pre-LN encoder layer: x + MHA(LN(x)), then x + MLP(LN(x))."""

    def __init__(self, dim: int = 64, heads: int = 4, hidden: int = 256, *, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=dim, decode=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(dim, rngs=rngs)
        self.fc1 = nnx.Linear(dim, hidden, rngs=rngs)
        self.fc2 = nnx.Linear(hidden, dim, rngs=rngs)

    def __call__(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(nnx.gelu(self.fc1(self.ln2(x))))


class TransformerStack(nnx.Module):
    def __init__(self, depth: int, dim: int = 64, heads: int = 4, hidden: int = 256, *, rngs: nnx.Rngs):
        layers = [TransformerLayer(dim, heads, hidden, rngs=rngs) for _ in range(depth)]
        # Flax >= 0.12 wants module lists wrapped as data; older versions take a plain list.
        self.layers = nnx.List(layers) if hasattr(nnx, "List") else layers

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


class CNN(nnx.Module):
    """Two 3x3 convs (relu + 2x2 average pool each) and a linear head, NHWC input (B, 28, 28, 1)."""

    def __init__(self, *, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(1, 8, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(8, 16, kernel_size=(3, 3), rngs=rngs)
        self.head = nnx.Linear(16 * 7 * 7, 10, rngs=rngs)

    def __call__(self, x):
        x = nnx.avg_pool(nnx.relu(self.conv1(x)), window_shape=(2, 2), strides=(2, 2))
        x = nnx.avg_pool(nnx.relu(self.conv2(x)), window_shape=(2, 2), strides=(2, 2))
        return self.head(x.reshape(x.shape[0], -1))


def masked_attention(q, k, v, mask):
    """``jax.nn.dot_product_attention`` with a boolean mask (True = attend)."""
    return jax.nn.dot_product_attention(q, k, v, mask=mask)


def heat_step(u):
    """One explicit step of the 2-D heat equation on a periodic grid (5-point stencil)."""
    lap = (
        jnp.roll(u, 1, axis=-2) + jnp.roll(u, -1, axis=-2)
        + jnp.roll(u, 1, axis=-1) + jnp.roll(u, -1, axis=-1) - 4.0 * u
    )
    return u + 0.1 * lap


def heat_diffusion(u):
    """Explicit 2-D heat equation on a periodic grid: 50 steps of a 5-point stencil (float64)."""
    return jax.lax.fori_loop(0, 50, lambda _, u: heat_step(u), u)


def discounted_returns(rewards):
    """Reverse scan over time (axis 0): G_t = r_t + 0.99 * G_{t+1}."""

    def step(carry, r):
        carry = r + 0.99 * carry
        return carry, carry

    _, returns = jax.lax.scan(step, jnp.zeros_like(rewards[0]), rewards, reverse=True)
    return returns


class GPT2Block(nnx.Module):
    """GPT-2 block: x + causal MHA(LN(x)), then x + MLP(LN(x)) with a 4x hidden layer and tanh gelu."""

    def __init__(self, dim: int, heads: int, *, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(dim, epsilon=1e-5, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=dim, decode=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(dim, epsilon=1e-5, rngs=rngs)
        self.fc = nnx.Linear(dim, 4 * dim, rngs=rngs)
        self.proj = nnx.Linear(4 * dim, dim, rngs=rngs)

    def __call__(self, x, mask):
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.proj(nnx.gelu(self.fc(self.ln2(x)), approximate=True))


class GPT2(nnx.Module):
    """GPT-2 from a config with random weights (small: 12 layers, d=768, 12 heads, 50257 tokens,
    1024 positions: 124 M parameters); the LM head is tied to the token embedding, as in GPT-2."""

    def __init__(self, vocab: int = 50257, positions: int = 1024, dim: int = 768, heads: int = 12,
                 depth: int = 12, *, rngs: nnx.Rngs):
        self.wte = nnx.Embed(vocab, dim, rngs=rngs)
        self.wpe = nnx.Embed(positions, dim, rngs=rngs)
        blocks = [GPT2Block(dim, heads, rngs=rngs) for _ in range(depth)]
        self.blocks = nnx.List(blocks) if hasattr(nnx, "List") else blocks
        self.ln_f = nnx.LayerNorm(dim, epsilon=1e-5, rngs=rngs)

    def __call__(self, tokens):
        seq = tokens.shape[1]
        x = self.wte(tokens) + self.wpe(jnp.arange(seq))
        mask = nnx.make_causal_mask(tokens)
        for block in self.blocks:
            x = block(x, mask)
        return self.wte.attend(self.ln_f(x))


class LinearStack(nnx.Module):
    """``depth`` square Linear layers with relu between them: a big-weights, little-compute model."""

    def __init__(self, dim: int, depth: int, *, rngs: nnx.Rngs):
        layers = [nnx.Linear(dim, dim, rngs=rngs) for _ in range(depth)]
        self.layers = nnx.List(layers) if hasattr(nnx, "List") else layers

    def __call__(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = nnx.relu(x)
        return x


class ViT(nnx.Module):
    """ViT-tiny: 16x16 patches of a 224x224x3 NHWC image, d=192, 12 pre-LN layers of 3 heads, MLP 768,
    a class token and learned positions, linear head on the class token (5.7 M parameters)."""

    def __init__(self, image: int = 224, patch: int = 16, dim: int = 192, heads: int = 3, depth: int = 12,
                 classes: int = 1000, *, rngs: nnx.Rngs):
        self.patch = nnx.Conv(3, dim, kernel_size=(patch, patch), strides=(patch, patch), padding="VALID", rngs=rngs)
        tokens = (image // patch) ** 2 + 1
        self.cls = nnx.Param(jax.random.normal(rngs.params(), (1, 1, dim)) * 0.02)
        self.pos = nnx.Param(jax.random.normal(rngs.params(), (1, tokens, dim)) * 0.02)
        layers = []
        for _ in range(depth):
            layer = TransformerLayer(dim, heads, 4 * dim, rngs=rngs)
            layers.append(layer)
        self.layers = nnx.List(layers) if hasattr(nnx, "List") else layers
        self.ln = nnx.LayerNorm(dim, rngs=rngs)
        self.head = nnx.Linear(dim, classes, rngs=rngs)

    def __call__(self, x):
        x = self.patch(x)
        x = x.reshape(x.shape[0], -1, x.shape[-1])
        cls = jnp.broadcast_to(self.cls[...], (x.shape[0], 1, x.shape[-1]))
        x = jnp.concatenate([cls, x], axis=1) + self.pos[...]
        for layer in self.layers:
            x = layer(x)
        return self.head(self.ln(x[:, 0]))


def param_bytes(model: Any) -> int:
    """Bytes of the model's arrays (0 for a plain function)."""
    if not isinstance(model, nnx.Module):
        return 0
    return int(sum(leaf.nbytes for leaf in jax.tree_util.tree_leaves(nnx.state(model)) if hasattr(leaf, "nbytes")))


def _eval(module: nnx.Module) -> nnx.Module:
    module.eval()
    return module


# ----------------------------------------------------------------------------------------- registry


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    description: str
    build: Callable[[], Any]
    input_shapes: tuple[tuple[Any, ...], ...]
    input_dtypes: tuple[str, ...]
    double: bool = False  # convert with enable_double_precision, run the reference under x64
    # Extra correctness cases besides "random" (see make_inputs).
    cases: tuple[str, ...] = ()
    # Integer inputs are drawn from [0, int_high) (token ids).
    int_high: int = 1000
    # Batch for latency/correctness when the bench's --batch would make runs too slow (big models).
    batch: int | None = None
    # Big models: one conversion per worker (no warm second one), fewer latency runs.
    big: bool = False

    def specs(self) -> list[Any]:
        """Input specs for to_onnx (call under ``x64(self.double)`` so float64 survives)."""
        return [jax.ShapeDtypeStruct(s, jnp.dtype(d)) for s, d in zip(self.input_shapes, self.input_dtypes, strict=True)]


_F32 = "float32"
MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in [
        ModelSpec("mlp", "quickstart MLP: Linear-Dropout-BatchNorm-gelu-Linear (eval)",
                  lambda: _eval(MLP(30, 20, 10, rngs=nnx.Rngs(0))), (("B", 30),), (_F32,)),
        ModelSpec("transformer_layer", "pre-LN transformer layer, MHA 4 heads, d=64, MLP 256",
                  lambda: _eval(TransformerLayer(rngs=nnx.Rngs(0))), (("B", 16, 64),), (_F32,)),
        ModelSpec("transformer_x12", "12 stacked pre-LN transformer layers",
                  lambda: _eval(TransformerStack(12, rngs=nnx.Rngs(0))), (("B", 16, 64),), (_F32,)),
        ModelSpec("transformer_x4", "4 stacked pre-LN transformer layers (d=64, 4 heads, MLP 256), 64 tokens",
                  lambda: _eval(TransformerStack(4, rngs=nnx.Rngs(0))), (("B", 64, 64),), (_F32,)),
        ModelSpec("transformer_x4_d256", "4 stacked pre-LN transformer layers, d=256, 4 heads, MLP 1024, 64 tokens",
                  lambda: _eval(TransformerStack(4, 256, 4, 1024, rngs=nnx.Rngs(0))), (("B", 64, 256),), (_F32,)),
        ModelSpec("cnn", "2x (Conv3x3-relu-avg_pool) + Linear, NHWC 28x28x1",
                  lambda: _eval(CNN(rngs=nnx.Rngs(0))), (("B", 28, 28, 1),), (_F32,)),
        ModelSpec("masked_attention", "jax.nn.dot_product_attention with a boolean mask",
                  lambda: masked_attention,
                  (("B", 16, 4, 32), ("B", 16, 4, 32), ("B", 16, 4, 32), ("B", 1, 16, 16)),
                  (_F32, _F32, _F32, "bool"),
                  cases=("huge_masked_logits", "fully_masked_row")),
        ModelSpec("heat_fori_f64", "fori_loop 2-D stencil (jnp.roll), 50 steps, float64",
                  lambda: heat_diffusion, (("B", 32, 32),), ("float64",), double=True),
        ModelSpec("reverse_scan", "lax.scan(reverse=True): discounted returns over 64 steps",
                  lambda: discounted_returns, ((64, "B", 8),), (_F32,)),
        ModelSpec("gpt2_small", "GPT-2 small from its config, random weights (124 M params), 16 tokens",
                  lambda: _eval(GPT2(rngs=nnx.Rngs(0))), (("B", 16),), ("int32",),
                  int_high=50257, batch=1, big=True),
        ModelSpec("linear_300m", "18 Linear 4096x4096 with relu between (302 M params)",
                  lambda: _eval(LinearStack(4096, 18, rngs=nnx.Rngs(0))), (("B", 4096),), (_F32,),
                  batch=1, big=True),
        ModelSpec("vit_tiny", "ViT-tiny: 16x16 patches of 224x224x3, d=192, 12 layers x 3 heads (5.7 M params)",
                  lambda: _eval(ViT(rngs=nnx.Rngs(0))), (("B", 224, 224, 3),), (_F32,), batch=1),
    ]
}


try:  # Hugging Face models when transformers is installed (bench/hf_models.py)
    import hf_models as _hf
except ImportError:
    pass
else:
    try:
        import transformers  # noqa: F401
    except ImportError:
        pass
    else:
        MODELS.update({spec.name: spec for spec in _hf.specs(ModelSpec)})


# ------------------------------------------------------------------------------------------- inputs


def make_inputs(spec: ModelSpec, batch: int, seed: int = 0, case: str = "random") -> list[np.ndarray]:
    """Concrete inputs with every symbolic dim set to ``batch``.

    Cases for masked attention (where converters differ in how they apply the mask):
    - ``huge_masked_logits``: the masked-out keys produce logits around +1e4, far above the kept
      ones. JAX replaces masked logits before the softmax, so they must not matter at all; a
      converter that applies the mask after the softmax gets (near) zero weights for kept keys.
    - ``fully_masked_row``: some query rows attend to nothing; JAX then averages over all keys
      (every logit is the same large negative number).
    """
    rng = np.random.default_rng(seed)
    arrays = []
    for shape, dtype in zip(spec.input_shapes, spec.input_dtypes, strict=True):
        concrete = tuple(batch if isinstance(d, str) else d for d in shape)
        if dtype == "bool":
            arrays.append(rng.random(concrete) < 0.7)
        elif np.issubdtype(np.dtype(dtype), np.integer):
            arrays.append(rng.integers(0, spec.int_high, concrete).astype(dtype))
        else:
            arrays.append(rng.standard_normal(concrete).astype(dtype))
    if case == "random":
        return arrays
    if spec.name != "masked_attention":
        raise ValueError(f"case {case!r} is only defined for masked_attention")
    q, k, v, mask = arrays
    seq = q.shape[1]
    if case == "huge_masked_logits":
        mask = np.ones_like(mask)
        mask[..., seq // 2:] = False  # the last half of the keys is padding
        q = np.abs(q)  # positive queries, so keys of large positive entries give large logits
        k = k.copy()
        k[:, seq // 2:] = 1e3  # logits ~ sum(q) * 1e3 / sqrt(32): about +1e4
        return [q, k, v, mask]
    if case == "fully_masked_row":
        mask = mask.copy()
        mask[:, :, :3, :] = False  # the first three queries see no key
        return [q, k, v, mask]
    raise ValueError(f"unknown case {case!r}")


def reference(spec: ModelSpec, fn: Any, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """JAX's outputs (flattened to a list) for ``arrays``."""
    with x64(spec.double):
        out = fn(*[jnp.asarray(a) for a in arrays])
        return [np.asarray(o) for o in jax.tree_util.tree_leaves(out)]

"""What the accelerator tests share: the skip without a TPU or GPU, and small NNX models whose
parameters live on JAX's default device (the accelerator, on an accelerator host).

These tests run on a TPU or GPU host (issue #34), one process holding the chip:

    python -m pytest -q -p no:xdist -o jax2onnx_xla_flags= tests/accelerator

Without an accelerator (CI, the default session) every test skips, saying so.
``JAX2ONNX_ACCELERATOR_TESTS_ON_CPU=1`` runs them on the CPU anyway, to check their own logic; the
TPU-only checks still skip there.
"""

from __future__ import annotations

import os

import jax
import numpy as np
import pytest

BACKEND = jax.default_backend()
requires_accelerator = pytest.mark.skipif(
    BACKEND == "cpu" and not os.environ.get("JAX2ONNX_ACCELERATOR_TESTS_ON_CPU"),
    reason="needs a TPU or GPU: JAX's default backend here is the CPU (run tests/accelerator on an accelerator "
           "host; JAX2ONNX_ACCELERATOR_TESTS_ON_CPU=1 checks the tests' own logic on a CPU)",
)
requires_tpu = pytest.mark.skipif(BACKEND != "tpu", reason=f"a TPU's default float32 matmul precision (bfloat16 "
                                                           f"passes); JAX's default backend here is {BACKEND!r}")


def platforms_of(tree) -> set[str]:
    """The platforms the JAX arrays of ``tree`` (a module's state, a pytree) live on."""
    return {d.platform for leaf in jax.tree_util.tree_leaves(tree) if hasattr(leaf, "sharding")
            for d in leaf.sharding.device_set}


def assert_on_the_accelerator(model) -> None:
    from flax import nnx

    assert platforms_of(nnx.state(model)) == {BACKEND}, platforms_of(nnx.state(model))


def mlp():
    """The issue's first model: a 3-layer MLP, 30 features in, 10 out."""
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            self.l1 = nnx.Linear(30, 256, rngs=rngs)
            self.l2 = nnx.Linear(256, 256, rngs=rngs)
            self.out = nnx.Linear(256, 10, rngs=rngs)

        def __call__(self, x):
            return self.out(jax.nn.relu(self.l2(jax.nn.relu(self.l1(x)))))

    return MLP(nnx.Rngs(0))


MLP_SPECS = [("B", 30)]


def transformer(layers: int = 4):
    """The issue's second model: pre-norm transformer blocks (attention, GELU MLP), 64 wide."""
    from flax import nnx

    class Block(nnx.Module):
        def __init__(self, rngs):
            self.norm1 = nnx.LayerNorm(64, rngs=rngs)
            self.attn = nnx.MultiHeadAttention(num_heads=4, in_features=64, decode=False, rngs=rngs)
            self.norm2 = nnx.LayerNorm(64, rngs=rngs)
            self.up = nnx.Linear(64, 256, rngs=rngs)
            self.down = nnx.Linear(256, 64, rngs=rngs)

        def __call__(self, x):
            x = x + self.attn(self.norm1(x))
            return x + self.down(jax.nn.gelu(self.up(self.norm2(x))))

    class Transformer(nnx.Module):
        def __init__(self, rngs):
            blocks = [Block(rngs) for _ in range(layers)]
            self.blocks = nnx.List(blocks) if hasattr(nnx, "List") else blocks
            self.head = nnx.Linear(64, 10, rngs=rngs)

        def __call__(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    return Transformer(nnx.Rngs(0))


TRANSFORMER_SPECS = [("B", 16, 64)]


def normal(shape, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def assert_float32_close(got, want) -> None:
    """``got`` (onnxruntime, float32 on the CPU) against ``want`` (JAX at highest precision where the
    parameters live) with the tolerances ``verify=True`` uses for a reference on this platform: float32's
    (1e-4, 1e-5), on a TPU :data:`jax2onnx.verification.reference.TPU_FLOAT32_TOLERANCES` (its float32
    tanh/log are 8e-5/4e-4 relative off, measured on a v5e; matmuls at highest 1e-7)."""
    from jax2onnx.verification.reference import HIGHEST, tolerance

    rtol, atol = tolerance(HIGHEST, "float32", (1e-4, 1e-5), want, BACKEND)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def at_highest(fn, *args):
    """``fn(*args)`` jitted at highest matmul precision, where its parameters live, as numpy."""
    with jax.default_matmul_precision("highest"):
        return jax.tree_util.tree_map(np.asarray, jax.jit(lambda *xs: fn(*xs))(*args))

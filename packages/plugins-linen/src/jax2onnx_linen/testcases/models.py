"""Whole Linen models: node budgets, and the fused ops under Linen's lifted transforms.

No lowering lives here; these testcases check what the other modules promise together:
- Dense → LayerNorm → Dense is 3 nodes (Gemm, LayerNormalization, Gemm), as in the NNX pack;
- a pre-LayerNorm transformer encoder block is as small as its NNX twin (15 nodes: Attention op,
  fused Q|K|V projection), a small CNN keeps one Transpose at each edge;
- ``nn.scan`` over layers keeps the fused ops inside the Scan body (the per-layer weights are
  scanned inputs), ``nn.remat`` and ``nn.jit`` are transparent, ``nn.vmap`` and ``jax.vmap`` convert
  (the fused regions fall back to flax's own math, lowered by the lax/jnp packs);
- both documented inputs work: ``functools.partial(model.apply, variables)`` and
  ``model.bind(variables)``.
Budgets are asserted on the float32 export: in float64 some ops have no onnxruntime kernel and are
decomposed (numbers are still compared).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import linen as nn
from jax2onnx.testing import Component, Testcase

from ._testing import applied, float32_ops, init_variables

_SMALL = {"low": -0.5, "high": 0.5}


class DenseLayerNormDense(nn.Module):
    @nn.compact
    def __call__(self, x):
        return nn.Dense(4)(nn.LayerNorm()(nn.Dense(16)(x)))


class EncoderBlock(nn.Module):
    """x + MHA(LN(x)); x + Dense(gelu(Dense(LN(x)))) — the NNX pack's PreLNTransformerLayer."""

    dim: int = 16
    heads: int = 2
    hidden: int = 32

    @nn.compact
    def __call__(self, x):
        x = x + nn.MultiHeadDotProductAttention(num_heads=self.heads)(nn.LayerNorm()(x))
        return x + nn.Dense(self.dim)(nn.gelu(nn.Dense(self.hidden)(nn.LayerNorm()(x))))


class SmallCNN(nn.Module):
    """conv → relu → max_pool → conv → avg_pool → flatten → dense (channels-last throughout)."""

    @nn.compact
    def __call__(self, x):
        x = nn.max_pool(nn.relu(nn.Conv(4, (3, 3))(x)), (2, 2), (2, 2))
        x = nn.avg_pool(nn.relu(nn.Conv(6, (3, 3))(x)), (2, 2), (2, 2))
        return nn.Dense(3)(x.reshape(x.shape[0], -1))


class _Residual(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        return x + nn.gelu(nn.Dense(8)(nn.LayerNorm()(x))), None


class ScannedStack(nn.Module):
    """Three residual blocks with stacked parameters, applied by ``nn.scan``."""

    @nn.compact
    def __call__(self, x):
        blocks = nn.scan(_Residual, variable_axes={"params": 0}, split_rngs={"params": True}, length=3)
        return blocks()(x, None)[0]


class RematJitStack(nn.Module):
    """``nn.remat`` and ``nn.jit`` around blocks: both must leave the fused ops intact."""

    @nn.compact
    def __call__(self, x):
        x = nn.remat(DenseLayerNormDense)()(x)
        return nn.jit(DenseLayerNormDense)()(jnp.tanh(x))


class VmappedDense(nn.Module):
    """``nn.vmap`` with per-member parameters: an ensemble of 3 Dense → LayerNorm → Dense."""

    @nn.compact
    def __call__(self, x):
        ensemble = nn.vmap(DenseLayerNormDense, in_axes=None, out_axes=0, variable_axes={"params": 0},
                           split_rngs={"params": True}, axis_size=3)
        return ensemble()(x)


def _jax_vmap(build, *shapes):
    def factory():
        fn = applied(build, *shapes, **_SMALL)()
        return jax.jit(jax.vmap(fn))

    return factory


def _grad_of_loss(build, *shapes):
    def factory():
        fn = applied(build, *shapes, **_SMALL)()
        return jax.jit(jax.grad(lambda x: jnp.sum(fn(x) ** 2)))

    return factory


def _bound_encoder():
    m = EncoderBlock()
    return m.bind(init_variables(m, (1, 5, 16), **_SMALL))


#: flax's attention softmax vs ONNX: float32-close (float64 keeps the decomposition, exact).
_NO_DECOMPOSITION = ("ReduceMean", "Softmax", "Sqrt", "Erf", "Einsum")


components = [
    Component(
        name="linen.models",
        onnx=["Gemm", "LayerNormalization", "Attention", "MatMul", "Conv", "Scan"],
        since="v0.7.0",
        testcases=[
            # 3 nodes: Gemm, LayerNormalization, Gemm (flax's own code decomposes to ~20).
            Testcase("linen_dense_layernorm_dense", factory=applied(DenseLayerNormDense, (1, 8), **_SMALL),
                     input_shapes=[("B", 8)], expected_ops=["Gemm", "LayerNormalization"], max_nodes=3),
            Testcase("linen_encoder_block", factory=applied(EncoderBlock, (1, 5, 16), **_SMALL),
                     input_shapes=[("B", 5, 16)],
                     # LN, QKV MatMul+Add+Split, Attention, out MatMul+Add, Add, LN, 2x(MatMul+Add), Gelu, Add
                     check=float32_ops("LayerNormalization", "Attention", "Gelu", forbids=_NO_DECOMPOSITION,
                                       max_nodes=15)),
            # The bound-module input gives the same graph; float32 only (the float64 path is the
            # case above), to keep the suite fast.
            Testcase("linen_encoder_block_bound", factory=_bound_encoder, input_shapes=[("B", 5, 16)],
                     check=float32_ops("LayerNormalization", "Attention", "Gelu", max_nodes=15), run_f64=False),
            Testcase("linen_small_cnn", factory=applied(SmallCNN, (1, 8, 8, 1), **_SMALL),
                     input_shapes=[("B", 8, 8, 1)],
                     check=float32_ops("Conv", "MaxPool", "AveragePool", "Gemm", max_transposes=2)),
            Testcase("linen_scan_over_layers", factory=applied(ScannedStack, (1, 8), **_SMALL),
                     input_shapes=[("B", 8)], expected_ops=["Scan", "LayerNormalization", "Gemm"],
                     check=float32_ops("Gelu")),
            Testcase("linen_remat_and_jit", factory=applied(RematJitStack, (1, 8), **_SMALL),
                     input_shapes=[("B", 8)], expected_ops=["Gemm", "LayerNormalization"],
                     forbidden_ops=["ReduceMean"], max_nodes=7),
            Testcase("linen_nn_vmap_ensemble", factory=applied(VmappedDense, (1, 8), **_SMALL),
                     input_shapes=[("B", 8)]),
            # jax.vmap over the applied model: the regions gain a batch axis and use their bodies.
            Testcase("linen_jax_vmap", factory=_jax_vmap(DenseLayerNormDense, (1, 8)),
                     input_shapes=[(3, "B", 8)]),
            # jax.grad of a loss w.r.t. the input: forward and backward bodies.
            Testcase("linen_grad_of_loss", factory=_grad_of_loss(DenseLayerNormDense, (1, 8)),
                     input_shapes=[("B", 8)], rtol=1e-3, atol=1e-4),
        ],
    ),
]

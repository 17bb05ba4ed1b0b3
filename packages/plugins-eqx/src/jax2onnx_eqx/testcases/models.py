"""Whole Equinox models, unbatched and batched with ``jax.vmap`` as equinox code batches them,
plus ``eqx.filter_jit`` around them.

- an MLP; a pre-LayerNorm transformer block over one sequence (``jax.vmap(self.ln1)(x)``, the
  MultiheadAttention, ``jax.vmap(self.fc1)``, ... as equinox code writes it), which exports as
  small as the NNX pack's twin (LayerNormalization, Attention, Gemm, Gelu); a small CNN, the twin
  of the NNX pack's ``small_cnn``.
- ``jax.vmap`` of a whole model keeps the layers fused: each layer's region is built outside the
  vmap around the batched call (``batching.py``). ``jax.vmap(cnn)`` is the NNX twin's graph less
  its layout Transposes.
Budgets are asserted on the float32 export.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jax2onnx.testing import Component, Testcase

from ._testing import float32_ops, model, vmapped


class Block(eqx.Module):
    """x + MHA(LN(x)); x + MLP(LN(x)) over one sequence (seq, dim)."""

    ln1: eqx.nn.LayerNorm
    attn: eqx.nn.MultiheadAttention
    ln2: eqx.nn.LayerNorm
    fc1: eqx.nn.Linear
    fc2: eqx.nn.Linear

    def __init__(self, dim: int = 16, heads: int = 2, hidden: int = 32, *, key: jax.Array):
        k1, k2, k3 = jax.random.split(key, 3)
        self.ln1 = eqx.nn.LayerNorm(dim)
        self.attn = eqx.nn.MultiheadAttention(heads, dim, key=k1)
        self.ln2 = eqx.nn.LayerNorm(dim)
        self.fc1 = eqx.nn.Linear(dim, hidden, key=k2)
        self.fc2 = eqx.nn.Linear(hidden, dim, key=k3)

    def __call__(self, x):
        h = jax.vmap(self.ln1)(x)
        x = x + self.attn(h, h, h)
        h = jax.vmap(self.ln2)(x)
        return x + jax.vmap(self.fc2)(jax.nn.gelu(jax.vmap(self.fc1)(h)))


class CNN(eqx.Module):
    """conv → relu → max_pool → conv → relu → avg_pool → flatten → linear on one (1, 8, 8) image:
    the twin of the nnx pack's ``SmallCNN`` (channels-last there, channels-first here)."""

    conv1: eqx.nn.Conv2d
    conv2: eqx.nn.Conv2d
    pool: eqx.nn.MaxPool2d
    avg: eqx.nn.AvgPool2d
    head: eqx.nn.Linear

    def __init__(self, *, key: jax.Array):
        k1, k2, k3 = jax.random.split(key, 3)
        self.conv1 = eqx.nn.Conv2d(1, 4, 3, padding=1, key=k1)
        self.conv2 = eqx.nn.Conv2d(4, 6, 3, padding=1, key=k2)
        self.pool = eqx.nn.MaxPool2d(2, 2)
        self.avg = eqx.nn.AvgPool2d(2, 2)
        self.head = eqx.nn.Linear(6 * 2 * 2, 3, key=k3)

    def __call__(self, x):
        x = self.pool(jax.nn.relu(self.conv1(x)))
        x = self.avg(jax.nn.relu(self.conv2(x)))
        return self.head(x.reshape(-1))


#: ``jax.vmap(cnn)`` over a batch, float32: the nnx pack's ``small_cnn`` (Transpose, Conv, Relu,
#: MaxPool, Conv, Relu, AveragePool, Transpose, Reshape, Gemm, then the max pool's NaN guard as one
#: check of the input: ReduceL1, Constant, Less, Not and the If whose then-branch is the guarded
#: copy) less its two layout Transposes, equinox being channels-first like ONNX. ``jax.nn.relu`` under
#: vmap is one Relu too: the jnp pack's region is made outside the vmap, as the layers' are.
_CNN_TWIN = ["Conv", "Relu", "MaxPool", "Conv", "Relu", "AveragePool", "Reshape", "Gemm",
             "ReduceL1", "Constant", "Less", "Not", "If"]


def _cnn_twin(proto, variant):
    from jax2onnx.ir.opsets import op_since

    if variant.double or any((op_since(o) or 0) > (variant.opset or 10**6) for o in _CNN_TWIN):
        return  # no double Conv/AveragePool kernel in onnxruntime: lax's exact decomposition
    ops = [n.op_type for n in proto.graph.node]
    assert ops == _CNN_TWIN, f"jax.vmap(cnn) is {ops}, expected the nnx twin's {_CNN_TWIN}"


def _mlp(key):
    return eqx.nn.MLP(8, 3, 16, 2, activation=jax.nn.tanh, key=key)


_SMALL = {"low": -0.5, "high": 0.5}


components = [
    Component(
        name="eqx.models",
        onnx=["MatMul", "Add", "LayerNormalization", "Attention", "Conv"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_model_mlp", factory=model(_mlp, **_SMALL), input_shapes=[(8,)], expected_ops=["MatMul"],
                     max_nodes=8),
            # vmap of the whole model: every Linear is one Gemm.
            Testcase("eqx_model_mlp_vmapped", factory=model(_mlp, wrap=jax.vmap, **_SMALL), input_shapes=[("B", 8)],
                     expected_ops=["Gemm"], forbidden_ops=["MatMul"], max_nodes=5),
            Testcase("eqx_model_mlp_filter_jit_vmap", factory=model(_mlp, wrap=lambda m: eqx.filter_jit(vmapped(m)),
                                                                    **_SMALL),
                     input_shapes=[("B", 8)], expected_ops=["Gemm"], forbidden_ops=["MatMul"], max_nodes=5),
            # LN, Unsqueeze, QKV MatMul, Split, Attention, out MatMul, Squeeze, Add, LN, Gemm, Gelu, Gemm, Add
            Testcase("eqx_model_attention_block", factory=model(lambda k: Block(key=k), **_SMALL),
                     input_shapes=[(5, 16)],
                     check=float32_ops("LayerNormalization", "Attention", "Gemm", "Gelu",
                                       forbids=("Softmax", "ReduceMean", "ReduceSum", "Sqrt"), max_nodes=13)),
            # vmap of the whole block (the LayerNorms and Linears under two vmaps, batch=2): LN, QKV MatMul,
            # Split, Attention, out MatMul, Add, LN, MatMul+Add, Gelu, MatMul+Add, Add — 13 nodes, the
            # NNX transformer twin's 15 less its layout ops (jax.nn.gelu's region is made outside the vmaps too).
            Testcase("eqx_model_attention_block_vmapped", factory=model(lambda k: Block(key=k), wrap=jax.vmap, **_SMALL),
                     input_shapes=[("B", 4, 16)], rtol=1e-4, atol=2e-5,
                     check=float32_ops("LayerNormalization", "Attention", "Split", "Gelu",
                                       forbids=("Softmax", "ReduceMean", "ReduceSum", "Sqrt", "Unsqueeze", "Erf", "Tanh"),
                                       max_nodes=13)),
            # jax.grad of a loss w.r.t. the input: the regions' forward and backward parts use their bodies.
            Testcase("eqx_model_attention_block_grad",
                     factory=model(lambda k: Block(key=k), wrap=lambda m: jax.jit(jax.grad(lambda x: jnp.sum(m(x) ** 2))),
                                   **_SMALL),
                     input_shapes=[(4, 16)], rtol=1e-3, atol=1e-4),
            # One image: Unsqueeze/Squeeze give each Conv and pool ONNX's batch axis; core's
            # SqueezeCancelPass removes the Squeeze → Relu → Unsqueeze pairs between layers, so one
            # Unsqueeze at the front is left (10 nodes, 17 before the pass), and the max pool's NaN
            # guard as one check of the input (ReduceL1, Constant, Less, Not, If) makes 15.
            Testcase("eqx_model_cnn", factory=model(lambda k: CNN(key=k), **_SMALL), input_shapes=[(1, 8, 8)],
                     check=float32_ops("Conv", "MaxPool", "AveragePool", "MatMul", forbids=("Transpose", "Squeeze"),
                                       max_nodes=15)),
            Testcase("eqx_model_cnn_vmapped", factory=model(lambda k: CNN(key=k), wrap=jax.vmap, **_SMALL),
                     input_shapes=[("B", 1, 8, 8)], check=_cnn_twin),
        ],
    ),
]

"""Whole NNX models: node budgets, and the modules' fused ops under jax.vmap / jax.grad / jax.jit.

No lowering lives here; these testcases check what the other modules promise together:
- the seed's quickstart MLP (eval mode) is Gemm, BatchNormalization, Gelu, Gemm (4 nodes, budget 6);
- a pre-LayerNorm transformer layer is 15 nodes (budget 25: Attention op, fused Q|K|V projection);
- ``jax.vmap`` over a model and ``jax.grad`` of its loss convert and match (the fused regions fall
  back to their bodies, lowered through the lax/jnp packs), ``jax.jit`` inside keeps the fusions;
- ``nnx.Sequential`` composes, and configurations the pack declines still convert.
Budgets are asserted on the float32 export: in float64, Gelu (and Conv, AveragePool) has no
onnxruntime kernel and is decomposed (``expected_ops_f64`` names what stays fused; numbers are
still compared).
"""

from __future__ import annotations

import flax
import jax
import jax.numpy as jnp
from flax import nnx
from jax2onnx.testing import Component, Testcase

from .helpers import fused_budget, model

_rngs = lambda: nnx.Rngs(0)  # noqa: E731
_FLAX_VERSION = tuple(int(p) for p in flax.__version__.split(".")[:2])
#: Attention's softmax is float32 inside JAX even for float64 inputs (see attention.py).
_F64_TOL = {"rtol_f64": 1e-6, "atol_f64": 1e-6}


class QuickstartMLP(nnx.Module):
    """The seed README's quickstart model."""

    def __init__(self, din: int, dmid: int, dout: int, *, rngs: nnx.Rngs):
        self.linear1 = nnx.Linear(din, dmid, rngs=rngs)
        self.dropout = nnx.Dropout(rate=0.1, rngs=rngs)
        self.bn = nnx.BatchNorm(dmid, rngs=rngs)
        self.linear2 = nnx.Linear(dmid, dout, rngs=rngs)

    def __call__(self, x):
        x = nnx.gelu(self.dropout(self.bn(self.linear1(x))))
        return self.linear2(x)


class MLPWithCallParams(QuickstartMLP):
    """The quickstart MLP with ``deterministic`` as a call argument (a runtime graph input)."""

    def __call__(self, x, deterministic: bool = True):
        x = self.bn(self.linear1(x), use_running_average=True)
        x = nnx.gelu(self.dropout(x, deterministic=deterministic))
        return self.linear2(x)


class PreLNTransformerLayer(nnx.Module):
    """x + MHA(LN(x)); x + Linear(gelu(Linear(LN(x))))."""

    def __init__(self, dim: int = 16, heads: int = 2, hidden: int = 32, *, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=dim, decode=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(dim, rngs=rngs)
        self.fc1 = nnx.Linear(dim, hidden, rngs=rngs)
        self.fc2 = nnx.Linear(hidden, dim, rngs=rngs)

    def __call__(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.fc2(nnx.gelu(self.fc1(self.ln2(x))))


class SmallCNN(nnx.Module):
    """conv → relu → max_pool → conv → avg_pool → flatten → linear (channels-last throughout)."""

    def __init__(self, *, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(1, 4, kernel_size=(3, 3), rngs=rngs)
        self.conv2 = nnx.Conv(4, 6, kernel_size=(3, 3), rngs=rngs)
        self.head = nnx.Linear(2 * 2 * 6, 3, rngs=rngs)

    def __call__(self, x):
        x = nnx.max_pool(nnx.relu(self.conv1(x)), (2, 2), (2, 2))
        x = nnx.avg_pool(nnx.relu(self.conv2(x)), (2, 2), (2, 2))
        return self.head(x.reshape(x.shape[0], -1))


class _ResidualBlock(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.ln = nnx.LayerNorm(8, rngs=rngs)
        self.lin = nnx.Linear(8, 8, rngs=rngs)

    def __call__(self, x):
        return x + nnx.gelu(self.lin(self.ln(x)))


def _scan_over_layers():
    """Three blocks with stacked parameters, applied by lax.scan: the fused ops live in the Scan
    body and read the per-layer weights as scanned inputs (not initializers)."""

    @nnx.vmap(in_axes=0, out_axes=0)
    def stack(key):
        return _ResidualBlock(nnx.Rngs(key))

    graphdef, state = nnx.split(stack(jax.random.split(jax.random.key(0), 3)))

    def run(x):
        def step(h, layer_state):
            return nnx.merge(graphdef, layer_state)(h), None

        return jax.lax.scan(step, x, state)[0]

    return run


def _mlp(eval_mode: bool = True):
    return model(lambda: QuickstartMLP(30, 20, 10, rngs=_rngs()), eval_mode=eval_mode, low=-0.5, high=0.5)


def _bn_ready(m):
    """Positive BatchNorm variances after a signed randomisation of the other weights."""
    state = nnx.state(m, nnx.BatchStat)
    nnx.update(m, jax.tree_util.tree_map(lambda a: jnp.abs(a) + 0.5, state))
    return m


def _quickstart():
    return _bn_ready(_mlp()())


#: flax < 0.11 takes BatchNorm's rsqrt(var + eps) in float32 (its statistics are float32 whatever
#: the param_dtype) even in a float64 model; JAX's own jit and eager results then differ by ~6e-8,
#: so float64 comparisons of BatchNorm models under jit/vmap/grad are float32-accurate there.
_BN_F64_TOL = {} if _FLAX_VERSION >= (0, 11) else {"rtol_f64": 1e-7, "atol_f64": 1e-7}


def _transformer():
    return model(lambda: PreLNTransformerLayer(rngs=_rngs()), low=-0.5, high=0.5)()


# The vmap/grad functions are also wrapped in jax.jit: the export is the same (core inlines the
# jit), and the JAX reference runs as one compiled program instead of hundreds of eager ops.


def _vmapped(build):
    def factory():
        m = build()
        return jax.jit(jax.vmap(lambda x: m(x)))

    return factory


def _grad_of_loss(build):
    def factory():
        m = build()
        return jax.jit(jax.grad(lambda x: jnp.sum(m(x) ** 2)))

    return factory


def _jitted(build):
    def factory():
        m = build()
        return jax.jit(lambda x: m(x))

    return factory


def _call_params():
    return _bn_ready(model(lambda: MLPWithCallParams(30, 20, 10, rngs=_rngs()), low=-0.5, high=0.5)())


#: The quickstart MLP: Gemm, BatchNormalization, Gelu, Gemm; float64 decomposes Gelu.
_MLP = {"expected_ops": ["Gemm", "BatchNormalization", "Gelu"], "expected_ops_f64": ["Gemm", "BatchNormalization"]}
_NO_DECOMPOSITION = ["ReduceMean", "Softmax", "Sqrt", "Erf", "Einsum"]

components = [
    Component(
        name="nnx.models",
        onnx=["Gemm", "BatchNormalization", "Gelu", "LayerNormalization", "Attention", "MatMul", "Conv"],
        since="v0.7.0",
        kind="component",
        testcases=[
            Testcase("mlp_quickstart_eval", factory=_quickstart, input_shapes=[("B", 30)],
                     # budget 6; Gemm, BatchNormalization, Gelu, Gemm is 4
                     **_MLP, check=fused_budget(max_nodes=4), forbidden_ops=["Dropout", "ReduceMean"]),
            Testcase("mlp_quickstart_call_params", factory=_call_params, input_shapes=[("B", 30)],
                     input_params={"deterministic": True}, expected_ops=[*_MLP["expected_ops"], "Dropout"],
                     expected_ops_f64=[*_MLP["expected_ops_f64"], "Dropout"], check=fused_budget(max_nodes=8)),
            Testcase("transformer_layer_pre_ln", factory=_transformer, input_shapes=[("B", 5, 16)],
                     # budget 25; LN, QKV MatMul+Add+Split, Attention, out MatMul+Add, Add, LN, 2x(MatMul+Add), Gelu, Add
                     expected_ops=["LayerNormalization", "Attention", "Gelu"],
                     expected_ops_f64=["LayerNormalization", "Attention"], check=fused_budget(max_nodes=15),
                     forbidden_ops=_NO_DECOMPOSITION, **_F64_TOL),
            Testcase("small_cnn", factory=model(lambda: SmallCNN(rngs=_rngs()), low=-0.5, high=0.5),
                     input_shapes=[("B", 8, 8, 1)],
                     expected_ops=["Conv", "MaxPool", "AveragePool", "Gemm"],
                     expected_ops_f64=["MaxPool", "Gemm"], check=fused_budget(max_transposes=2)),
            Testcase("sequential", factory=model(lambda: nnx.Sequential(nnx.Linear(6, 8, rngs=_rngs()), nnx.relu,
                                                                        nnx.Linear(8, 3, rngs=_rngs())),
                                                 low=-0.5, high=0.5),
                     # nnx.relu stored in the layer list is the unpatched function: lax lowers it (one Max).
                     input_shapes=[("B", 6)], expected_ops=["Gemm"], max_nodes=3),
            Testcase("scan_over_stacked_layers", factory=_scan_over_layers, input_shapes=[("B", 8)],
                     expected_ops=["Scan", "LayerNormalization", "Gemm", "Gelu"],
                     expected_ops_f64=["Scan", "LayerNormalization", "Gemm"]),
            # jax.jit inside the exported function: its body is inlined and the fusions still apply.
            Testcase("mlp_quickstart_jit", factory=_jitted(_quickstart), input_shapes=[("B", 30)],
                     **_MLP, check=fused_budget(max_nodes=4), **_BN_F64_TOL),
            # jax.vmap: each fused region gains a batch axis and is lowered as its body instead.
            Testcase("mlp_quickstart_vmap", factory=_vmapped(_quickstart), input_shapes=[(3, "B", 30)],
                     **_BN_F64_TOL),
            Testcase("transformer_layer_vmap", factory=_vmapped(_transformer), input_shapes=[(2, "B", 4, 16)],
                     **_F64_TOL),
            # jax.grad of a loss w.r.t. the input (forces from energies): forward and backward bodies.
            Testcase("mlp_quickstart_grad", factory=_grad_of_loss(_quickstart), input_shapes=[("B", 30)],
                     rtol=1e-3, atol=1e-4, **_BN_F64_TOL),
            Testcase("transformer_layer_grad", factory=_grad_of_loss(_transformer), input_shapes=[("B", 4, 16)],
                     rtol=1e-3, atol=1e-4, **_F64_TOL),
        ],
    ),
    Component(
        name="nnx.declined_configurations",
        onnx=[],
        since="v0.7.0",
        description="module configurations no single ONNX op expresses: flax's own code, lowered by lax",
        testcases=[
            Testcase("conv_circular_padding",
                     factory=model(lambda: nnx.Conv(2, 3, kernel_size=(3, 3), padding="CIRCULAR", rngs=_rngs()),
                                   low=-1.0, high=1.0),
                     input_shapes=[("B", 5, 5, 2)]),
            Testcase("layer_norm_middle_axis",
                     factory=model(lambda: nnx.LayerNorm(4, reduction_axes=1, feature_axes=1, rngs=_rngs())),
                     input_shapes=[("B", 4, 3)], forbidden_ops=["LayerNormalization"]),
            Testcase("linear_general_leading_axis",
                     factory=model(lambda: nnx.LinearGeneral(4, 5, axis=1, rngs=_rngs()), low=-1.0, high=1.0),
                     input_shapes=[("B", 4, 3)]),
        ],
    ),
]

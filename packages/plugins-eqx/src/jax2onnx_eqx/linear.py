"""eqx.nn.Linear → MatMul (+ Add); eqx.nn.Identity needs nothing.

Equinox layers take one example (``x`` of shape ``(in_features,)``) and are batched with
``jax.vmap``. The unbatched call is one ``MatMul`` with the transposed weight (a constant, folded)
plus the bias ``Add``. Under ``jax.vmap``/``eqx.filter_vmap`` the region's shapes gain the batch axis
and core lowers equinox's own math instead: ``dot_general`` + ``add``, which the lax pack also
turns into a MatMul and an Add. ``"scalar"`` features are left to equinox's code.
"""

from __future__ import annotations

import equinox as eqx
import jax
from jax2onnx.fusion import Operands, is_array, one_output_like
from jax2onnx.plugin import Lowerings, Patch
from jax2onnx.testing import Component, Testcase

from ._fusion import call_module
from ._testing import model, vmapped
from .batching import patch_call

lowerings = Lowerings()

LINEAR = "jax2onnx_eqx.linear"


def fuse(module, x, *, body, batch: int):
    """The region for ``module(x)`` (``batch`` = 0) or ``jax.vmap(module)(x)`` (``batch`` = 1,
    see ``batching.py``); None when equinox's own code must run."""
    if not is_array(x) or x.ndim != 1 + batch or module.in_features == "scalar" or module.out_features == "scalar":
        return None
    return call_module(LINEAR, module, body, {"x": x}, batch=batch)


patches = [Patch("equinox.nn.Linear", "__call__", patch_call(fuse))]


@lowerings.register_call(LINEAR)
def lower_linear(ctx, *ins):
    ops = Operands(ctx, ins)
    x_shape = ops.shape("x")
    if "weight" not in ops or not one_output_like(ctx, (*x_shape[:-1], ops.shape("weight")[0])):
        return None
    dtype = ctx.avals_out[0].dtype
    x, weight = ctx.cast(ops["x"], dtype), ctx.cast(ops["weight"], dtype)
    bias = ctx.cast(ops["bias"], dtype) if "bias" in ops else None
    if len(x_shape) == 2:  # a vmapped call: one Gemm against the (out, in) weight as stored
        return ctx.op.Gemm(x, weight, bias, transB=1)
    y = ctx.op.MatMul(x, ctx.op.Transpose(weight, perm=[1, 0]))  # the Transpose folds on a constant
    return y if bias is None else ctx.op.Add(y, bias)


# ---------------------------------------------------------------------------------------------
# Testcases


def _ensemble():
    """One Linear per example, its weight vmapped with the input (a batched weight stays in the vmap)."""
    base = eqx.nn.Linear(8, 5, key=jax.random.key(0))
    return lambda ws, x: jax.vmap(lambda w, v: eqx.tree_at(lambda lin: lin.weight, base, w)(v))(ws, x)

components = [
    Component(
        name="eqx.linear",
        onnx=["MatMul", "Add", "Gemm"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_linear", factory=model(lambda k: eqx.nn.Linear(8, 5, key=k)), input_shapes=[(8,)],
                     expected_ops=["MatMul", "Add"], max_nodes=2),
            Testcase("eqx_linear_no_bias", factory=model(lambda k: eqx.nn.Linear(8, 5, use_bias=False, key=k)),
                     input_shapes=[(8,)], expected_ops=["MatMul"], max_nodes=1),
            # The usual way to batch an equinox layer: jax.vmap(linear) is one Gemm.
            Testcase("eqx_linear_vmapped", factory=model(lambda k: eqx.nn.Linear(8, 5, key=k), wrap=vmapped),
                     input_shapes=[("B", 8)], expected_ops=["Gemm"], max_nodes=1),
            Testcase("eqx_linear_vmapped_no_bias",
                     factory=model(lambda k: eqx.nn.Linear(8, 5, use_bias=False, key=k), wrap=vmapped),
                     input_shapes=[("B", 8)], expected_ops=["Gemm"], max_nodes=1),
            # Inside another vmapped function: the region is built outside the vmap, one Gemm.
            Testcase("eqx_linear_inside_vmapped_fn",
                     factory=model(lambda k: eqx.nn.Linear(8, 5, key=k), wrap=lambda m: jax.vmap(lambda v: m(v) * 2.0)),
                     input_shapes=[("B", 8)], expected_ops=["Gemm"], forbidden_ops=["MatMul"], max_nodes=2),
            # Two vmaps (batch=2): MatMul + Add over the leading axes.
            Testcase("eqx_linear_nested_vmap",
                     factory=model(lambda k: eqx.nn.Linear(8, 5, key=k), wrap=lambda m: jax.vmap(jax.vmap(m))),
                     input_shapes=[("B", 3, 8)], expected_ops=["MatMul", "Add"], max_nodes=2),
            # Weights vmapped too (an ensemble of Linears): equinox's math, as JAX batches it.
            Testcase("eqx_linear_vmapped_ensemble", factory=_ensemble, input_shapes=[("B", 5, 8), ("B", 8)]),
            Testcase("eqx_linear_scalar_in", factory=model(lambda k: eqx.nn.Linear("scalar", 3, key=k)),
                     input_shapes=[()]),
            Testcase("eqx_identity", factory=lambda: eqx.nn.Identity(), input_shapes=[("B", 3)], max_nodes=1),
        ],
    ),
]

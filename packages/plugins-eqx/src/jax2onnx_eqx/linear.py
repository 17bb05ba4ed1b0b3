"""eqx.nn.Linear → MatMul (+ Add); eqx.nn.Identity needs nothing.

Equinox layers take one example (``x`` of shape ``(in_features,)``) and are batched with
``jax.vmap``. The unbatched call is one ``MatMul`` with the transposed weight (a constant, folded)
plus the bias ``Add``. Under ``jax.vmap``/``eqx.filter_vmap`` the region's shapes gain the batch axis
and core lowers equinox's own math instead: ``dot_general`` + ``add``, which the lax pack also
turns into a MatMul and an Add. ``"scalar"`` features are left to equinox's code.
"""

from __future__ import annotations

from jax2onnx.fusion import Operands, is_array, one_output_like
from jax2onnx.plugin import Lowerings, ModulePatch

from ._fusion import call_module
from .batching import patch_call

lowerings = Lowerings()

LINEAR = "jax2onnx_eqx.linear"


def fuse(module, x, *, body, batch: int):
    """The region for ``module(x)`` (``batch`` = 0) or ``jax.vmap(module)(x)`` (``batch`` = 1,
    see ``batching.py``); None when equinox's own code must run."""
    if not is_array(x) or x.ndim != 1 + batch or module.in_features == "scalar" or module.out_features == "scalar":
        return None
    return call_module(LINEAR, module, body, {"x": x}, batch=batch)


patches = [ModulePatch("equinox.nn.Linear", "__call__", patch_call(fuse))]


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

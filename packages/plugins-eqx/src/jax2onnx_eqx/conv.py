"""eqx.nn.Conv (Conv1d/2d/3d) → one ``Conv`` with the bias fused.

Equinox convolves channels-first, ONNX's layout, with the kernel already in ONNX's (O, I, spatial)
order: nothing is transposed. One example ``(C, *spatial)`` gains ONNX's batch axis with an
``Unsqueeze``/``Squeeze`` pair; ``jax.vmap(conv)(x)`` is the bare ``Conv`` (``batching.py``). Strides,
dilation, groups and the explicit padding are read from the region's body (equinox's own
``lax.conv_general_dilated``), so ``SAME``/``VALID``/explicit padding are what equinox computes.
Non-zero padding modes (REFLECT, REPLICATE, CIRCULAR), and float64 (onnxruntime has no double Conv
kernel), are left to equinox's code and the lax pack.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.fusion import Operands, conv_attrs, find_eqns, is_array, one_output_like, region_body
from jax2onnx.plugin import Lowerings, ModulePatch

from ._fusion import call_module, from_onnx_batch, onnx_batch
from .batching import patch_call

lowerings = Lowerings()

CONV = "jax2onnx_eqx.conv"


def fuse(module, x, *, body, batch: int):
    """The region for ``module(x)`` (``batch`` = 0) or ``jax.vmap(module)(x)`` (``batch`` = 1);
    None when equinox's own code must run."""
    if (not is_array(x) or x.ndim != module.num_spatial_dims + 1 + batch
            or getattr(module, "padding_mode", "ZEROS") != "ZEROS"):
        return None
    return call_module(CONV, module, body, {"x": x}, batch=batch)


patches = [ModulePatch("equinox.nn.Conv", "__call__", patch_call(fuse))]


def _body_conv(ctx):
    found = find_eqns(region_body(ctx), "conv_general_dilated")
    return found[0] if len(found) == 1 else None


@lowerings.register_call(CONV)
def lower_conv(ctx, *ins):
    dtype = np.dtype(ctx.avals_out[0].dtype)
    eqn = _body_conv(ctx) if dtype in ctx.kernel_dtypes("Conv") else None
    if eqn is None or any(d != 1 for d in eqn.params["lhs_dilation"]) or eqn.params.get("batch_group_count", 1) != 1:
        return None
    padding = [d for pair in eqn.params["padding"] for d in pair]
    if not all(isinstance(d, (int, np.integer)) and d >= 0 for d in padding):
        return None
    ops = Operands(ctx, ins)
    batch = ctx.marked.params["batch"]
    out_channels = ops.shape("weight")[0]
    if not one_output_like(ctx, ctx.avals_out[0].shape):
        return None
    x = onnx_batch(ctx, ctx.cast(ops["x"], dtype), ops.shape("x"), batch)
    if x is None:
        return None
    bias = None
    if "bias" in ops:
        bias = ctx.op.Reshape(ctx.cast(ops["bias"], dtype), ctx.i64([out_channels]))  # (O, 1, 1) → (O,), folded
    pairs = eqn.params["padding"]
    y = ctx.op.Conv(x, ctx.cast(ops["weight"], dtype), bias, **conv_attrs(eqn),
                    pads=[int(lo) for lo, _ in pairs] + [int(hi) for _, hi in pairs])
    return from_onnx_batch(ctx, y, batch)

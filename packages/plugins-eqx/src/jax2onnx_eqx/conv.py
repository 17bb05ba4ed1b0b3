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

import equinox as eqx
import jax
import numpy as np
from jax2onnx.fusion import CONV_DTYPES, Operands, conv_attrs, find_eqns, is_array, one_output_like, region_body
from jax2onnx.plugin import Lowerings, Patch
from jax2onnx.testing import Component, Testcase

from ._fusion import call_module, from_onnx_batch, onnx_batch
from ._testing import float32_ops, model, vmapped
from .batching import patch_call

lowerings = Lowerings()

CONV = "jax2onnx_eqx.conv"
_DTYPES = CONV_DTYPES


def fuse(module, x, *, body, batch: int):
    """The region for ``module(x)`` (``batch`` = 0) or ``jax.vmap(module)(x)`` (``batch`` = 1);
    None when equinox's own code must run."""
    if (not is_array(x) or x.ndim != module.num_spatial_dims + 1 + batch
            or getattr(module, "padding_mode", "ZEROS") != "ZEROS"):
        return None
    return call_module(CONV, module, body, {"x": x}, batch=batch)


patches = [Patch("equinox.nn.Conv", "__call__", patch_call(fuse))]


def _body_conv(ctx):
    found = find_eqns(region_body(ctx), "conv_general_dilated")
    return found[0] if len(found) == 1 else None


@lowerings.register_call(CONV)
def lower_conv(ctx, *ins):
    dtype = np.dtype(ctx.avals_out[0].dtype)
    eqn = _body_conv(ctx) if dtype in _DTYPES else None
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


# ---------------------------------------------------------------------------------------------
# Testcases

_CONV = float32_ops("Conv", forbids=("Add", "Transpose"))

components = [
    Component(
        name="eqx.conv",
        onnx=["Conv", "Unsqueeze", "Squeeze", "ConvTranspose"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_conv2d", factory=model(lambda k: eqx.nn.Conv2d(2, 3, 3, padding=1, key=k)),
                     input_shapes=[(2, 6, 6)], check=float32_ops("Conv", forbids=("Add", "Transpose"), max_nodes=3)),
            Testcase("eqx_conv2d_vmapped",
                     factory=model(lambda k: eqx.nn.Conv2d(2, 3, 3, stride=2, key=k), wrap=vmapped),
                     input_shapes=[("B", 2, 7, 7)], check=float32_ops("Conv", forbids=("Add", "Transpose"), max_nodes=1)),
            Testcase("eqx_conv2d_same_grouped",
                     factory=model(lambda k: eqx.nn.Conv2d(4, 6, 3, padding="SAME", groups=2, use_bias=False, key=k),
                                   wrap=vmapped),
                     input_shapes=[("B", 4, 5, 5)], check=float32_ops("Conv", max_nodes=1)),
            # Two vmaps: both batch axes folded into ONNX's N with a Reshape, and back.
            Testcase("eqx_conv2d_nested_vmap",
                     factory=model(lambda k: eqx.nn.Conv2d(2, 3, 3, key=k), wrap=lambda m: jax.vmap(jax.vmap(m))),
                     input_shapes=[("B", 2, 2, 5, 5)], check=float32_ops("Conv", forbids=("Transpose",), max_nodes=5)),
            Testcase("eqx_conv1d_dilated", factory=model(lambda k: eqx.nn.Conv1d(2, 4, 3, dilation=2, key=k)),
                     input_shapes=[(2, 9)], check=_CONV),
            Testcase("eqx_conv3d", factory=model(lambda k: eqx.nn.Conv3d(2, 2, 2, key=k), wrap=vmapped),
                     input_shapes=[("B", 2, 3, 4, 3)], check=_CONV),
            # REFLECT padding: equinox's own code (a Pad, then the convolution), lowered by lax.
            Testcase("eqx_conv2d_reflect",
                     factory=model(lambda k: eqx.nn.Conv2d(2, 3, 3, padding=1, padding_mode="REFLECT", key=k)),
                     input_shapes=[(2, 5, 5)]),
            Testcase("eqx_conv_transpose2d",
                     factory=model(lambda k: eqx.nn.ConvTranspose2d(2, 3, 3, stride=2, key=k), wrap=jax.vmap),
                     input_shapes=[("B", 2, 4, 4)]),
        ],
    ),
]

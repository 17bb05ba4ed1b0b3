"""eqx.nn.LayerNorm, eqx.nn.RMSNorm, eqx.nn.GroupNorm → LayerNormalization, RMSNormalization (+ Add
for its bias), GroupNormalization.

Equinox normalises one example over all of its axes (LayerNorm/RMSNorm: ``x.shape == shape``), so
the ONNX ops run with ``axis=0``; GroupNorm takes ``(channels, *spatial)`` and gains the batch axis
ONNX wants with an ``Unsqueeze``/``Squeeze`` pair. A call with a ``State`` (the BatchNorm-compatible
form) or custom dtypes (half precision) use equinox's own math. ``jax.vmap(norm)(x)`` is the same
single op with the batch axis in front (``batching.py``).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
from jax2onnx.fusion import Operands, is_array, norm_weight, one_output_like, stash_type
from jax2onnx.plugin import Lowerings, ModulePatch

from ._fusion import call_module, from_onnx_batch, onnx_batch
from .batching import patch_call

lowerings = Lowerings()

LAYER_NORM = "jax2onnx_eqx.layer_norm"
RMS_NORM = "jax2onnx_eqx.rms_norm"
GROUP_NORM = "jax2onnx_eqx.group_norm"
#: equinox normalises in at least float32 and casts back; the fused ops run in the input's dtype.
_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _fits(mark: str, module, x, batch: int) -> bool:
    if not is_array(x) or np.dtype(x.dtype) not in _DTYPES or x.ndim <= batch:
        return False
    example = tuple(x.shape[batch:])
    if mark == GROUP_NORM:
        # channels is None for GroupNorm(channels=None, channelwise_affine=False): no weights to
        # match, but the fused op's unit scale/zero bias need a static channel count.
        if len(example) < 2 or not isinstance(example[0], (int, np.integer)):
            return False
        return module.channels is None or int(example[0]) == int(module.channels)
    return example == tuple(module.shape or example)


def fuse(mark: str, module, x, *, body, batch: int):
    """The region for ``module(x)`` (``batch`` = 0) or ``jax.vmap(module)(x)`` (``batch`` = 1,
    see ``batching.py``); None when equinox's own code must run."""
    if not _fits(mark, module, x, batch):
        return None
    extra = {"groups": int(module.groups)} if mark == GROUP_NORM else {}
    return call_module(mark, module, body, {"x": x}, epsilon=float(module.eps), batch=batch, **extra)


patches = [
    ModulePatch("equinox.nn.LayerNorm", "__call__", patch_call(partial(fuse, LAYER_NORM))),
    ModulePatch("equinox.nn.RMSNorm", "__call__", patch_call(partial(fuse, RMS_NORM))),
    ModulePatch("equinox.nn.GroupNorm", "__call__", patch_call(partial(fuse, GROUP_NORM))),
]


def _example(ctx, ops: Operands) -> tuple[int, list, Any] | None:
    """(batch axis, one example's shape, dtype) of a LayerNorm/RMSNorm region normalizing the
    whole example, or None."""
    batch = ctx.marked.params["batch"]
    shape = ops.shape("x")[batch:]
    if not shape or not one_output_like(ctx, ops.shape("x")) or ("weight" in ops and ops.shape("weight") != shape):
        return None
    return batch, shape, ctx.avals_out[0].dtype


@lowerings.register_call(LAYER_NORM)
def lower_layer_norm(ctx, *ins):
    ops = Operands(ctx, ins)
    example = _example(ctx, ops)
    if example is None:
        return None
    batch, shape, dtype = example
    return ctx.op.LayerNormalization(ctx.cast(ops["x"], dtype), norm_weight(ctx, ops, "weight", shape, dtype, 1.0),
                                     norm_weight(ctx, ops, "bias", shape, dtype, None), axis=batch,
                                     epsilon=ctx.marked.params["epsilon"], stash_type=stash_type(ctx, dtype))


@lowerings.register_call(RMS_NORM)
def lower_rms_norm(ctx, *ins):
    if np.dtype(ctx.avals_out[0].dtype) not in ctx.kernel_dtypes("RMSNormalization"):  # none before opset 23
        return None
    ops = Operands(ctx, ins)
    example = _example(ctx, ops)
    if example is None:
        return None
    batch, shape, dtype = example
    y = ctx.op.RMSNormalization(ctx.cast(ops["x"], dtype), norm_weight(ctx, ops, "weight", shape, dtype, 1.0), axis=batch,
                                epsilon=ctx.marked.params["epsilon"], stash_type=stash_type(ctx, dtype))
    return ctx.op.Add(y, ctx.cast(ops["bias"], dtype)) if "bias" in ops else y


@lowerings.register_call(GROUP_NORM)
def lower_group_norm(ctx, *ins):
    if not ctx.has_op("GroupNormalization"):  # per-channel scale/bias: none before opset 21 (-18 scaled per group)
        return None
    ops = Operands(ctx, ins)
    shape = ops.shape("x")
    if not one_output_like(ctx, shape):
        return None
    batch = ctx.marked.params["batch"]
    channels = shape[batch]
    dtype = ctx.avals_out[0].dtype
    groups = ctx.marked.params["groups"]
    x = onnx_batch(ctx, ctx.cast(ops["x"], dtype), shape, batch)
    if x is None:
        return None
    y = ctx.op.GroupNormalization(x, norm_weight(ctx, ops, "weight", [channels], dtype, 1.0),
                                  norm_weight(ctx, ops, "bias", [channels], dtype, 0.0), num_groups=groups,
                                  epsilon=ctx.marked.params["epsilon"], stash_type=stash_type(ctx, dtype))
    return from_onnx_batch(ctx, y, batch)

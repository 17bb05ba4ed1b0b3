"""keras.layers.LayerNormalization, BatchNormalization (inference), RMSNormalization,
GroupNormalization → LayerNormalization, BatchNormalization, RMSNormalization, GroupNormalization.

Each layer's ``call`` runs as a marked region (see ``_fusion``); the lowering emits the one ONNX
op when the configuration maps onto it exactly and declines otherwise (non-trailing axes,
``rms_scaling``, training-mode statistics, masks, mixed precision), leaving Keras's own math to
the lax lowerings. Channels-last layers get a Transpose on each side of the channels-first op; the
transpose pass cancels them against a neighbouring Conv lowered in NCHW.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from jax2onnx.fusion import Operands, channels_first, is_array, norm_axes, norm_weight, static_ints
from jax2onnx.plugin import Lowerings

from ._fusion import call_layer, mark_name, one_output_like, patch, plain_float32

lowerings = Lowerings()

LAYER_NORM = "layer_norm"
BATCH_NORM = "batch_norm"
RMS_NORM = "rms_norm"
GROUP_NORM = "group_norm"


def _trailing(axes: tuple[int, ...], ndim: int) -> bool:
    """ONNX's normalisations reduce over the trailing axes ``[axis, ndim)``."""
    return bool(axes) and axes == tuple(range(axes[0], ndim))


# ---------------------------------------------------------------------------------------------
# Patches


def _patch_trailing_norm(mark: str, declines: Callable[[Any], bool] = lambda layer: False):
    """The patch of a LayerNormalization/RMSNormalization layer: its region when it normalizes
    over trailing axes (what the ONNX ops take) and ``declines(layer)`` does not say otherwise."""

    def patch_call(original):
        def call(self, x, *args, **kwargs):
            if args or kwargs or not is_array(x) or not plain_float32(self, x) or declines(self):
                return original(self, x, *args, **kwargs)
            axes = norm_axes(self.axis, x.ndim)
            if not _trailing(axes, x.ndim):
                return original(self, x)
            return call_layer(mark, self, lambda layer, y: original(layer, y), {"x": x},
                              axis=axes[0], epsilon=float(self.epsilon))

        return call

    return patch_call


def _patch_batch_norm(original):
    def call(self, inputs, training=None, mask=None, **kwargs):
        training_flag = training if isinstance(training, (bool, type(None), np.bool_)) else "traced"
        if (
            (training_flag == "traced" or (bool(training_flag) and self.trainable))  # updates the statistics
            or mask is not None
            or kwargs
            or not is_array(inputs)
            or inputs.ndim < 2
            or not plain_float32(self, inputs)
        ):
            return original(self, inputs, training=training, mask=mask, **kwargs)
        return call_layer(BATCH_NORM, self, lambda layer, x: original(layer, x, training=False), {"x": inputs},
                          axis=int(self.axis) % inputs.ndim, epsilon=float(self.epsilon))

    return call


def _patch_group_norm(original):
    def call(self, inputs, *args, **kwargs):
        if args or kwargs or not is_array(inputs) or inputs.ndim < 2 or not plain_float32(self, inputs):
            return original(self, inputs, *args, **kwargs)
        axis = int(self.axis) % inputs.ndim
        if axis not in (1, inputs.ndim - 1):
            return original(self, inputs)
        return call_layer(GROUP_NORM, self, lambda layer, x: original(layer, x), {"x": inputs},
                          axis=axis, groups=int(self.groups), epsilon=float(self.epsilon))

    return call


_NORM = "keras.src.layers.normalization"
patches = [
    # rms_scaling=True is an RMS norm with a LayerNormalization class: Keras's own math
    patch(f"{_NORM}.layer_normalization", "LayerNormalization",
          _patch_trailing_norm(LAYER_NORM, lambda layer: layer.rms_scaling)),
    patch(f"{_NORM}.batch_normalization", "BatchNormalization", _patch_batch_norm),
    patch(f"{_NORM}.rms_normalization", "RMSNormalization", _patch_trailing_norm(RMS_NORM)),
    patch(f"{_NORM}.group_normalization", "GroupNormalization", _patch_group_norm),
]


# ---------------------------------------------------------------------------------------------
# Lowerings


def _trailing_norm(op_type: str, scale: str, bias: str | None):
    """A LayerNormalization/RMSNormalization region → the ONNX op of that name over ``axis`` and
    the trailing axes, with the layer's ``scale`` (and ``bias``) weights."""

    def lower(ctx, *ins):
        if np.dtype(np.float32) not in ctx.kernel_dtypes(op_type):  # RMSNormalization: none before opset 23
            return None
        ops = Operands(ctx, ins)
        p = ctx.marked.params
        shape = ops.shape("x")
        feat = list(shape[p["axis"]:])
        if not one_output_like(ctx, shape) or not static_ints(feat):
            return None
        weights = [norm_weight(ctx, ops, scale, feat, np.float32, 1.0)]
        if bias is not None:
            weights.append(norm_weight(ctx, ops, bias, feat, np.float32, None))
        return getattr(ctx.op, op_type)(ops["x"], *weights, axis=p["axis"], epsilon=p["epsilon"])

    lower.__name__ = f"lower_{op_type.lower()}"
    return lower


lowerings.register_call(mark_name(LAYER_NORM))(_trailing_norm("LayerNormalization", "gamma", "beta"))
lowerings.register_call(mark_name(RMS_NORM))(_trailing_norm("RMSNormalization", "scale", None))


@lowerings.register_call(mark_name(BATCH_NORM))
def lower_batch_norm(ctx, *ins):
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank, axis = len(shape), p["axis"]
    # ONNX puts channels at axis 1: (N, C) and (N, C, ...) as they are, channels-last transposed.
    if not one_output_like(ctx, shape) or axis not in (1, rank - 1) or not static_ints([shape[axis]]):
        return None
    c = [shape[axis]]
    scale, bias = norm_weight(ctx, ops, "gamma", c, np.float32, 1.0), norm_weight(ctx, ops, "beta", c, np.float32, 0.0)
    mean = norm_weight(ctx, ops, "moving_mean", c, np.float32, 0.0)
    var = norm_weight(ctx, ops, "moving_variance", c, np.float32, 1.0)
    return channels_first(ctx, ops["x"], rank, axis != 1,
                          lambda x: ctx.op.BatchNormalization(x, scale, bias, mean, var, epsilon=p["epsilon"]))


@lowerings.register_call(mark_name(GROUP_NORM))
def lower_group_norm(ctx, *ins):
    if not ctx.has_op("GroupNormalization"):  # per-channel scale/bias: none before opset 21 (-18 scaled per group)
        return None
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank, axis = len(shape), p["axis"]
    if not one_output_like(ctx, shape) or not static_ints([shape[axis]]):
        return None
    c = [shape[axis]]
    scale, bias = norm_weight(ctx, ops, "gamma", c, np.float32, 1.0), norm_weight(ctx, ops, "beta", c, np.float32, 0.0)
    return channels_first(ctx, ops["x"], rank, axis != 1, lambda x: ctx.op.GroupNormalization(
        x, scale, bias, num_groups=p["groups"], epsilon=p["epsilon"]))

"""nn.BatchNorm (running averages), nn.LayerNorm, nn.RMSNorm, nn.GroupNorm, nn.InstanceNorm →
BatchNormalization, LayerNormalization, RMSNormalization, GroupNormalization, InstanceNormalization.

Each module's ``__call__`` runs as a marked region (see ``_fusion`` and ``jax2onnx.fusion``); the lowering emits the one
ONNX op when the configuration maps onto it exactly and declines otherwise (masks, ``axis_name``,
non-trailing reduction axes, training-mode BatchNorm, which updates ``batch_stats``), leaving
flax's own math to the lax lowerings. InstanceNormalization has no float64 kernel in onnxruntime:
float64 instance norms use the decomposition.
"""

from __future__ import annotations

from typing import Any

from jax2onnx.fusion import (
    is_array,
    lower_batch_norm,
    lower_group_norm,
    lower_instance_norm,
    lower_layer_norm,
    lower_rms_norm,
    norm_axes,
    static_bool,
)
from jax2onnx.plugin import Lowerings, ModulePatch

from ._fusion import call_module, fusable, linen_calls

lowerings = Lowerings()

BATCH_NORM = "jax2onnx_linen.batch_norm"
LAYER_NORM = "jax2onnx_linen.layer_norm"
RMS_NORM = "jax2onnx_linen.rms_norm"
GROUP_NORM = "jax2onnx_linen.group_norm"
INSTANCE_NORM = "jax2onnx_linen.instance_norm"


def _plain(self: Any, x: Any, args: tuple, kwargs: dict, reads: tuple[str, ...] = ("params",)) -> bool:
    """An array input, no mask or extra argument, no cross-device statistics, bound in apply mode."""
    return (
        not args
        and all(k == "mask" and v is None for k, v in kwargs.items())
        and getattr(self, "axis_name", None) is None
        and is_array(x)
        and fusable(self, reads=reads)
    )


# ---------------------------------------------------------------------------------------------
# Patches


def _patch_batch_norm(original):
    def __call__(self, x, use_running_average=None, *args, **kwargs):
        flag = static_bool(use_running_average if use_running_average is not None else self.use_running_average)
        # Training mode computes batch statistics and updates batch_stats: flax's own code.
        if flag is not True or not _plain(self, x, args, kwargs, reads=("params", "batch_stats")):
            return original(self, x, use_running_average, *args, **kwargs)
        return call_module(BATCH_NORM, self, lambda m, x: original(m, x, use_running_average), {"x": x},
                           collections=("params", "batch_stats"), feature_axes=norm_axes(self.axis, x.ndim),
                           epsilon=float(self.epsilon))

    return __call__


def _patch_trailing_norm(mark: str):
    def make(original):
        def __call__(self, x, *args, **kwargs):
            if not _plain(self, x, args, kwargs):
                return original(self, x, *args, **kwargs)
            return call_module(mark, self, lambda m, x: original(m, x), {"x": x},
                               reduction_axes=norm_axes(self.reduction_axes, x.ndim),
                               feature_axes=norm_axes(self.feature_axes, x.ndim), epsilon=float(self.epsilon))

        return __call__

    return make


def _patch_group_norm(original):
    def __call__(self, x, *args, **kwargs):
        if not _plain(self, x, args, kwargs) or self.reduction_axes is not None or x.ndim < 2:
            return original(self, x, *args, **kwargs)
        channels = int(x.shape[-1])
        groups = self.num_groups if self.num_groups is not None else (
            channels // self.group_size if self.group_size and channels % self.group_size == 0 else None)
        if groups is None:  # flax raises its own error for an invalid configuration
            return original(self, x, *args, **kwargs)
        return call_module(GROUP_NORM, self, lambda m, x: original(m, x), {"x": x},
                           num_groups=int(groups), epsilon=float(self.epsilon))

    return __call__


def _patch_instance_norm(original):
    def __call__(self, x, *args, **kwargs):
        if not _plain(self, x, args, kwargs) or x.ndim < 3:
            return original(self, x, *args, **kwargs)
        return call_module(INSTANCE_NORM, self, lambda m, x: original(m, x), {"x": x},
                           feature_axes=norm_axes(self.feature_axes, x.ndim), epsilon=float(self.epsilon))

    return __call__


patches = [
    ModulePatch("flax.linen.BatchNorm", "__call__", _patch_batch_norm, interceptor=linen_calls),
    ModulePatch("flax.linen.LayerNorm", "__call__", _patch_trailing_norm(LAYER_NORM), interceptor=linen_calls),
    ModulePatch("flax.linen.RMSNorm", "__call__", _patch_trailing_norm(RMS_NORM), interceptor=linen_calls),
    ModulePatch("flax.linen.GroupNorm", "__call__", _patch_group_norm, interceptor=linen_calls),
    ModulePatch("flax.linen.InstanceNorm", "__call__", _patch_instance_norm, interceptor=linen_calls),
]


# ---------------------------------------------------------------------------------------------
# Lowerings: the kit's normalizations (operands x, scale, bias, mean, var as flax names them)

lowerings.add(f"call:{LAYER_NORM}", lower_layer_norm)
lowerings.add(f"call:{RMS_NORM}", lower_rms_norm)
lowerings.add(f"call:{BATCH_NORM}", lower_batch_norm)
lowerings.add(f"call:{GROUP_NORM}", lower_group_norm)
lowerings.add(f"call:{INSTANCE_NORM}", lower_instance_norm)

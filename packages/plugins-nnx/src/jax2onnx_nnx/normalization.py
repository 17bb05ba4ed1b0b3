"""nnx.BatchNorm, LayerNorm, RMSNorm, GroupNorm → BatchNormalization, LayerNormalization,
RMSNormalization, GroupNormalization.

Each module's ``__call__`` runs as a marked region (see ``_fusion``); the lowering emits the one
ONNX op when the configuration maps onto it exactly and declines otherwise (custom axes, masks,
training-mode batch statistics, ``axis_name``), leaving flax's own math to the lax lowerings.
"""

from __future__ import annotations

from jax2onnx.fusion import (
    lower_batch_norm,
    lower_group_norm,
    lower_layer_norm,
    lower_rms_norm,
    norm_axes,
    static_bool,
)
from jax2onnx.plugin import Lowerings, ModulePatch, is_array

from ._fusion import call_module, graphdef_node_types

lowerings = Lowerings()

BATCH_NORM = "jax2onnx_nnx.batch_norm"
LAYER_NORM = "jax2onnx_nnx.layer_norm"
RMS_NORM = "jax2onnx_nnx.rms_norm"
GROUP_NORM = "jax2onnx_nnx.group_norm"


def _plain_call(args: tuple, kwargs: dict, allowed: tuple[str, ...] = ("mask",)) -> bool:
    """No extra positional args and only ``None`` for the keyword arguments we do not fuse."""
    return not args and all(k in allowed and v is None for k, v in kwargs.items())


# ---------------------------------------------------------------------------------------------
# Patches


def _patch_batch_norm(original):
    def __call__(self, x, use_running_average=None, **kwargs):
        flag = static_bool(use_running_average if use_running_average is not None else self.use_running_average)
        if (
            flag is not True  # training mode updates the running statistics: flax's own code
            or not _plain_call((), kwargs)
            or getattr(self, "axis_name", None) is not None
            or not is_array(x)
        ):
            return original(self, x, use_running_average, **kwargs)
        return call_module(
            BATCH_NORM, self, lambda m, x: original(m, x, use_running_average=True), {"x": x},
            feature_axes=norm_axes(self.axis, x.ndim), epsilon=float(self.epsilon),
        )

    return __call__


def _patch_axes_norm(mark):
    """LayerNorm and RMSNorm: the same plain call, as region ``mark`` with their reduction and
    feature axes and epsilon."""

    def patch_call(original):
        def __call__(self, x, *args, **kwargs):
            if not _plain_call(args, kwargs) or getattr(self, "axis_name", None) is not None or not is_array(x):
                return original(self, x, *args, **kwargs)
            return call_module(
                mark, self, lambda m, x: original(m, x), {"x": x},
                reduction_axes=norm_axes(self.reduction_axes, x.ndim),
                feature_axes=norm_axes(self.feature_axes, x.ndim), epsilon=float(self.epsilon),
            )

        return __call__

    return patch_call


def _patch_group_norm(original):
    def __call__(self, x, *args, **kwargs):
        if (
            not _plain_call(args, kwargs)
            or getattr(self, "axis_name", None) is not None
            or getattr(self, "reduction_axes", None) is not None  # only the default: all but batch
            or not is_array(x)
            or x.ndim < 2
            or int(self.feature_axis) % x.ndim != x.ndim - 1
        ):
            return original(self, x, *args, **kwargs)
        return call_module(
            GROUP_NORM, self, lambda m, x: original(m, x), {"x": x},
            num_groups=int(self.num_groups), epsilon=float(self.epsilon),
        )

    return __call__


patches = [
    ModulePatch("flax.nnx.BatchNorm", "__call__", _patch_batch_norm, holders=graphdef_node_types),
    ModulePatch("flax.nnx.LayerNorm", "__call__", _patch_axes_norm(LAYER_NORM), holders=graphdef_node_types),
    ModulePatch("flax.nnx.RMSNorm", "__call__", _patch_axes_norm(RMS_NORM), holders=graphdef_node_types),
    ModulePatch("flax.nnx.GroupNorm", "__call__", _patch_group_norm, holders=graphdef_node_types),
]


# ---------------------------------------------------------------------------------------------
# Lowerings: the kit's normalizations (operands x, scale, bias, mean, var as flax names them)

lowerings.add(f"call:{LAYER_NORM}", lower_layer_norm)
lowerings.add(f"call:{RMS_NORM}", lower_rms_norm)
lowerings.add(f"call:{BATCH_NORM}", lower_batch_norm)
lowerings.add(f"call:{GROUP_NORM}", lower_group_norm)

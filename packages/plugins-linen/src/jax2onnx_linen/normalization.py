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

from flax import linen as nn
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
from jax2onnx.plugin import Lowerings, Patch
from jax2onnx.testing import Component, Testcase

from ._fusion import call_module, fusable
from ._testing import applied, float32_ops

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
    Patch("flax.linen.BatchNorm", "__call__", _patch_batch_norm),
    Patch("flax.linen.LayerNorm", "__call__", _patch_trailing_norm(LAYER_NORM)),
    Patch("flax.linen.RMSNorm", "__call__", _patch_trailing_norm(RMS_NORM)),
    Patch("flax.linen.GroupNorm", "__call__", _patch_group_norm),
    Patch("flax.linen.InstanceNorm", "__call__", _patch_instance_norm),
]


# ---------------------------------------------------------------------------------------------
# Lowerings: the kit's normalizations (operands x, scale, bias, mean, var as flax names them)

lowerings.add(f"call:{LAYER_NORM}", lower_layer_norm)
lowerings.add(f"call:{RMS_NORM}", lower_rms_norm)
lowerings.add(f"call:{BATCH_NORM}", lower_batch_norm)
lowerings.add(f"call:{GROUP_NORM}", lower_group_norm)
lowerings.add(f"call:{INSTANCE_NORM}", lower_instance_norm)


# ---------------------------------------------------------------------------------------------
# Testcases

_NO_STATS = ["ReduceMean", "ReduceSum", "Sqrt"]


def _bn(shape, **kw):
    return applied(lambda: nn.BatchNorm(use_running_average=True, **kw), shape)


components = [
    Component(
        name="linen.batch_norm",
        onnx=["BatchNormalization"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_batch_norm", factory=_bn((1, 4)), input_shapes=[("B", 4)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS + ["Transpose"], max_nodes=1),
            Testcase("linen_batch_norm_no_scale_no_bias", factory=_bn((1, 6), use_scale=False, use_bias=False),
                     input_shapes=[("B", 6)], expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            Testcase("linen_batch_norm_4d", factory=_bn((1, 4, 5, 3)), input_shapes=[("B", 4, 5, 3)],
                     expected_ops=["BatchNormalization", "Transpose"], forbidden_ops=_NO_STATS, max_nodes=3),
            Testcase("linen_batch_norm_axis1", factory=_bn((1, 4, 3), axis=1), input_shapes=[("B", 4, 3)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS + ["Transpose"]),
            # use_running_average given at the call, as Linen models pass `train` through.
            Testcase("linen_batch_norm_call_flag",
                     factory=applied(lambda: nn.BatchNorm(), (1, 5), init_kwargs={"use_running_average": True},
                                     use_running_average=True),
                     input_shapes=[("B", 5)], expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
        ],
    ),
    Component(
        name="linen.layer_norm",
        onnx=["LayerNormalization"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_layer_norm", factory=applied(lambda: nn.LayerNorm(), (1, 6)), input_shapes=[("B", 6)],
                     expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS, max_nodes=1),
            Testcase("linen_layer_norm_3d", factory=applied(lambda: nn.LayerNorm(epsilon=1e-3), (1, 5, 8)),
                     input_shapes=[("B", 5, 8)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS),
            Testcase("linen_layer_norm_multiaxis",
                     factory=applied(lambda: nn.LayerNorm(reduction_axes=(1, 2, 3), feature_axes=(1, 2, 3)),
                                     (1, 3, 4, 2)),
                     input_shapes=[("B", 3, 4, 2)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=1),
            Testcase("linen_layer_norm_features_last",
                     factory=applied(lambda: nn.LayerNorm(reduction_axes=(-2, -1), feature_axes=-1), (1, 3, 4)),
                     input_shapes=[("B", 3, 4)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS),
            Testcase("linen_layer_norm_no_bias_no_scale",
                     factory=applied(lambda: nn.LayerNorm(use_bias=False, use_scale=False), (1, 8)),
                     input_shapes=[("B", 8)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS),
            # Normalising a middle axis is no LayerNormalization: flax's math, lowered by lax.
            Testcase("linen_layer_norm_middle_axis",
                     factory=applied(lambda: nn.LayerNorm(reduction_axes=1, feature_axes=1), (1, 4, 3)),
                     input_shapes=[("B", 4, 3)], forbidden_ops=["LayerNormalization"]),
        ],
    ),
    Component(
        name="linen.rms_norm",
        onnx=["RMSNormalization"],
        since="v0.3.0",
        testcases=[
            Testcase("linen_rms_norm", factory=applied(lambda: nn.RMSNorm(), (1, 6)), input_shapes=[("B", 6)],
                     expected_ops=["RMSNormalization"], forbidden_ops=_NO_STATS, max_nodes=1),
            Testcase("linen_rms_norm_3d", factory=applied(lambda: nn.RMSNorm(epsilon=1e-3), (1, 3, 5)),
                     input_shapes=[("B", 3, 5)], expected_ops=["RMSNormalization"], forbidden_ops=_NO_STATS),
        ],
    ),
    Component(
        name="linen.group_norm",
        onnx=["GroupNormalization"],
        since="v0.3.0",
        testcases=[
            Testcase("linen_group_norm", factory=applied(lambda: nn.GroupNorm(num_groups=4), (1, 3, 3, 8)),
                     input_shapes=[("B", 3, 3, 8)], expected_ops=["GroupNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=3),
            Testcase("linen_group_norm_group_size", factory=applied(lambda: nn.GroupNorm(num_groups=None, group_size=3),
                                                                    (1, 6)),
                     input_shapes=[("B", 6)], expected_ops=["GroupNormalization"],
                     forbidden_ops=_NO_STATS + ["Transpose"], max_nodes=1),
        ],
    ),
    Component(
        name="linen.instance_norm",
        onnx=["InstanceNormalization", "Transpose"],
        since="v0.7.0",
        testcases=[
            Testcase("linen_instance_norm", factory=applied(lambda: nn.InstanceNorm(), (1, 5, 5, 4)),
                     input_shapes=[("B", 5, 5, 4)], check=float32_ops("InstanceNormalization", max_nodes=3)),
            Testcase("linen_instance_norm_channels_first",
                     factory=applied(lambda: nn.InstanceNorm(feature_axes=1), (1, 3, 6)),
                     input_shapes=[("B", 3, 6)], check=float32_ops("InstanceNormalization", max_nodes=1)),
        ],
    ),
]

"""nnx.BatchNorm, LayerNorm, RMSNorm, GroupNorm → BatchNormalization, LayerNormalization,
RMSNormalization, GroupNormalization.

Each module's ``__call__`` runs as a marked region (see ``_fusion``); the lowering emits the one
ONNX op when the configuration maps onto it exactly and declines otherwise (custom axes, masks,
training-mode batch statistics, ``axis_name``), leaving flax's own math to the lax lowerings.
"""

from __future__ import annotations

from flax import nnx
from jax2onnx.fusion import (
    lower_batch_norm,
    lower_group_norm,
    lower_layer_norm,
    lower_rms_norm,
    norm_axes,
    static_bool,
)
from jax2onnx.plugin import Lowerings, Patch, is_array
from jax2onnx.testing import Component, Testcase

from ._fusion import call_module
from .cases.helpers import model

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


def _patch_layer_norm(original):
    def __call__(self, x, *args, **kwargs):
        if not _plain_call(args, kwargs) or getattr(self, "axis_name", None) is not None or not is_array(x):
            return original(self, x, *args, **kwargs)
        return call_module(
            LAYER_NORM, self, lambda m, x: original(m, x), {"x": x},
            reduction_axes=norm_axes(self.reduction_axes, x.ndim), feature_axes=norm_axes(self.feature_axes, x.ndim),
            epsilon=float(self.epsilon),
        )

    return __call__


def _patch_rms_norm(original):
    def __call__(self, x, *args, **kwargs):
        if not _plain_call(args, kwargs) or getattr(self, "axis_name", None) is not None or not is_array(x):
            return original(self, x, *args, **kwargs)
        return call_module(
            RMS_NORM, self, lambda m, x: original(m, x), {"x": x},
            reduction_axes=norm_axes(self.reduction_axes, x.ndim), feature_axes=norm_axes(self.feature_axes, x.ndim),
            epsilon=float(self.epsilon),
        )

    return __call__


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
    Patch("flax.nnx.BatchNorm", "__call__", _patch_batch_norm),
    Patch("flax.nnx.LayerNorm", "__call__", _patch_layer_norm),
    Patch("flax.nnx.RMSNorm", "__call__", _patch_rms_norm),
    Patch("flax.nnx.GroupNorm", "__call__", _patch_group_norm),
]


# ---------------------------------------------------------------------------------------------
# Lowerings: the kit's normalizations (operands x, scale, bias, mean, var as flax names them)

lowerings.add(f"call:{LAYER_NORM}", lower_layer_norm)
lowerings.add(f"call:{RMS_NORM}", lower_rms_norm)
lowerings.add(f"call:{BATCH_NORM}", lower_batch_norm)
lowerings.add(f"call:{GROUP_NORM}", lower_group_norm)


# ---------------------------------------------------------------------------------------------
# Testcases

_rngs = lambda: nnx.Rngs(0)  # noqa: E731


def _bn(n, **kw):
    return model(lambda: nnx.BatchNorm(n, use_running_average=True, rngs=_rngs(), **kw))


_NO_STATS = ["ReduceMean", "ReduceSum", "Sqrt"]

components = [
    Component(
        name="nnx.batch_norm",
        onnx=["BatchNormalization"],
        since="v0.1.0",
        testcases=[
            Testcase("batch_norm_simple", factory=_bn(4), input_shapes=[("B", 4)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS + ["Transpose"], max_nodes=1),
            Testcase("batch_norm_2d", factory=_bn(6), input_shapes=[("B", 6)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS, max_nodes=1),
            Testcase("batch_norm_2d_use_bias_false", factory=_bn(6, use_bias=False), input_shapes=[("B", 6)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            Testcase("batch_norm_2d_use_scale_false", factory=_bn(6, use_scale=False), input_shapes=[("B", 6)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            Testcase("batch_norm_4d", factory=_bn(3), input_shapes=[("B", 4, 5, 3)],
                     expected_ops=["BatchNormalization", "Transpose"], forbidden_ops=_NO_STATS, max_nodes=3),
            Testcase("batch_norm_4d_use_bias_false", factory=_bn(3, use_bias=False), input_shapes=[("B", 4, 5, 3)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            Testcase("batch_norm_4d_use_scale_false", factory=_bn(3, use_scale=False), input_shapes=[("B", 4, 5, 3)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            Testcase("batch_norm_minimal", factory=_bn(1), input_shapes=[(2, 1)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            # Built in training mode, exported after model.eval(): the running statistics are used.
            Testcase("batch_norm_eval_mode",
                     factory=model(lambda: nnx.BatchNorm(5, rngs=_rngs()), eval_mode=True),
                     input_shapes=[("B", 5)], expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS),
            # The batch axis second: BatchNormalization's channel axis is 1 already.
            Testcase("batch_norm_3d_axis1", factory=_bn(4, axis=1), input_shapes=[("B", 4, 3)],
                     expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS + ["Transpose"]),
        ],
    ),
    Component(
        name="nnx.layer_norm",
        onnx=["LayerNormalization"],
        since="v0.1.0",
        testcases=[
            Testcase("layer_norm", factory=model(lambda: nnx.LayerNorm(6, rngs=_rngs())), input_shapes=[("B", 6)],
                     expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS, max_nodes=1),
            Testcase("layer_norm_multiaxis",
                     factory=model(lambda: nnx.LayerNorm(3 * 4 * 2, reduction_axes=(1, 2, 3), feature_axes=(1, 2, 3),
                                                         rngs=_rngs())),
                     input_shapes=[("B", 3, 4, 2)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=1),
            Testcase("layer_norm_3d", factory=model(lambda: nnx.LayerNorm(8, rngs=_rngs())),
                     input_shapes=[("B", 5, 8)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS),
            Testcase("layer_norm_no_bias_no_scale",
                     factory=lambda: nnx.LayerNorm(8, use_bias=False, use_scale=False, rngs=_rngs()),
                     input_shapes=[("B", 8)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS),
            # Normalise over two trailing axes with one scale per last-axis feature.
            Testcase("layer_norm_features_last",
                     factory=model(lambda: nnx.LayerNorm(4, reduction_axes=(-2, -1), feature_axes=-1, rngs=_rngs())),
                     input_shapes=[("B", 3, 4)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS),
        ],
    ),
    Component(
        name="nnx.rms_norm",
        onnx=["RMSNormalization"],
        since="v0.3.0",
        testcases=[
            Testcase("rms_norm", factory=model(lambda: nnx.RMSNorm(6, rngs=_rngs())), input_shapes=[("B", 6)],
                     expected_ops=["RMSNormalization"], forbidden_ops=_NO_STATS, max_nodes=1),
            Testcase("rms_norm_2", factory=model(lambda: nnx.RMSNorm(5, epsilon=1e-3, rngs=_rngs())),
                     input_shapes=[("B", 3, 5)], expected_ops=["RMSNormalization"], forbidden_ops=_NO_STATS),
        ],
    ),
    Component(
        name="nnx.group_norm",
        onnx=["GroupNormalization"],
        since="v0.3.0",
        testcases=[
            Testcase("group_norm", factory=model(lambda: nnx.GroupNorm(8, num_groups=4, rngs=_rngs())),
                     input_shapes=[("B", 3, 3, 8)], expected_ops=["GroupNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=3),
            Testcase("group_norm_2", factory=model(lambda: nnx.GroupNorm(6, num_groups=2, rngs=_rngs())),
                     input_shapes=[("B", 6)], expected_ops=["GroupNormalization"],
                     forbidden_ops=_NO_STATS + ["Transpose"], max_nodes=1),
        ],
    ),
]

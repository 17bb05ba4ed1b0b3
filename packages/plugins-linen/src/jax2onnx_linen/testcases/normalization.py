"""Testcases of :mod:`jax2onnx_linen.normalization` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from flax import linen as nn
from jax2onnx.testing import Component, Testcase

from ._testing import applied, float32_ops

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

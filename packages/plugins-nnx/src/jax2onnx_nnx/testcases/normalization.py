"""Testcases of :mod:`jax2onnx_nnx.normalization` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from flax import nnx
from jax2onnx.testing import Component, Testcase

from .helpers import model

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

"""Testcases of :mod:`jax2onnx_keras.normalization` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from jax2onnx.testing import Component, Testcase

from ._testing import keras_model


def _layer(cls_name, **kw):
    def build(keras):
        return getattr(keras.layers, cls_name)(**kw)

    return build


_NO_STATS = ["ReduceMean", "ReduceSum", "Sqrt"]


components = [
    Component(
        name="keras.LayerNormalization",
        onnx=["LayerNormalization"],
        since="v0.1.0",
        testcases=[
            Testcase("keras_layer_norm", factory=keras_model(_layer("LayerNormalization"), (6,)),
                     input_shapes=[("B", 6)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=1, run_f64=False),
            Testcase("keras_layer_norm_3d", factory=keras_model(_layer("LayerNormalization", epsilon=1e-5), (None, 8)),
                     input_shapes=[("B", "T", 8)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=1, run_f64=False),
            Testcase("keras_layer_norm_two_axes",
                     factory=keras_model(_layer("LayerNormalization", axis=[-2, -1]), (3, 4)),
                     input_shapes=[("B", 3, 4)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=1, run_f64=False),
            Testcase("keras_layer_norm_no_center_no_scale",
                     factory=keras_model(_layer("LayerNormalization", center=False, scale=False), (6,)),
                     input_shapes=[("B", 6)], expected_ops=["LayerNormalization"], max_nodes=1, run_f64=False),
            # Not a trailing axis, and rms_scaling: Keras's own math, still exact.
            Testcase("keras_layer_norm_axis1", factory=keras_model(_layer("LayerNormalization", axis=1), (3, 4)),
                     input_shapes=[("B", 3, 4)], forbidden_ops=["LayerNormalization"], run_f64=False),
            Testcase("keras_layer_norm_rms_scaling",
                     factory=keras_model(_layer("LayerNormalization", rms_scaling=True), (6,)),
                     input_shapes=[("B", 6)], forbidden_ops=["LayerNormalization"], run_f64=False),
        ],
    ),
    Component(
        name="keras.BatchNormalization",
        onnx=["BatchNormalization"],
        since="v0.1.0",
        testcases=[
            Testcase("keras_batch_norm", factory=keras_model(_layer("BatchNormalization"), (5,)),
                     input_shapes=[("B", 5)], expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=1, run_f64=False),
            Testcase("keras_batch_norm_4d", factory=keras_model(_layer("BatchNormalization"), (4, 4, 3)),
                     input_shapes=[("B", 4, 4, 3)], expected_ops=["BatchNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=3, run_f64=False),
            Testcase("keras_batch_norm_channels_first", factory=keras_model(_layer("BatchNormalization", axis=1),
                                                                            (3, 4, 4)),
                     input_shapes=[("B", 3, 4, 4)], expected_ops=["BatchNormalization"],
                     forbidden_ops=_NO_STATS + ["Transpose"], max_nodes=1, run_f64=False),
            Testcase("keras_batch_norm_no_center_no_scale",
                     factory=keras_model(_layer("BatchNormalization", center=False, scale=False), (5,)),
                     input_shapes=[("B", 5)], expected_ops=["BatchNormalization"], max_nodes=1, run_f64=False),
        ],
    ),
    Component(
        name="keras.RMSNormalization",
        onnx=["RMSNormalization"],
        since="v0.1.0",
        testcases=[
            Testcase("keras_rms_norm", factory=keras_model(_layer("RMSNormalization"), (None, 6)),
                     input_shapes=[("B", "T", 6)], expected_ops=["RMSNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=1, run_f64=False),
        ],
    ),
    Component(
        name="keras.GroupNormalization",
        onnx=["GroupNormalization"],
        since="v0.1.0",
        testcases=[
            Testcase("keras_group_norm", factory=keras_model(_layer("GroupNormalization", groups=2), (3, 3, 4)),
                     input_shapes=[("B", 3, 3, 4)], expected_ops=["GroupNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=3, run_f64=False),
            Testcase("keras_group_norm_2d", factory=keras_model(_layer("GroupNormalization", groups=3), (6,)),
                     input_shapes=[("B", 6)], expected_ops=["GroupNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=1, run_f64=False),
        ],
    ),
]

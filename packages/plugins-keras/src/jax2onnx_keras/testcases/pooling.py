"""Testcases of :mod:`jax2onnx_keras.pooling` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from jax2onnx.fusion import MAX_POOL_OPS
from jax2onnx.testing import Component, Testcase, channels_last_with_nan

from ._testing import check_ops, keras_model


def _layer(cls_name, *args, **kw):
    def build(keras):
        return getattr(keras.layers, cls_name)(*args, **kw)

    return build


def _conv_pool(keras):
    L = keras.layers
    return keras.Sequential([L.Conv2D(4, 3, padding="same"), L.MaxPooling2D(3, strides=2, padding="same"),
                             L.Conv2D(4, 1), L.AveragePooling2D(2), L.GlobalAveragePooling2D()])


components = [
    Component(
        name="keras.Pooling",
        onnx=["MaxPool", "AveragePool"],
        since="v0.1.0",
        testcases=[
            Testcase("keras_max_pool_3x3", factory=keras_model(_layer("MaxPooling2D", 3, strides=1), (6, 6, 2)),
                     input_shapes=[("B", 6, 6, 2)], expected_ops=MAX_POOL_OPS, max_nodes=6, run_f64=False),
            Testcase("keras_max_pool_same", factory=keras_model(_layer("MaxPooling2D", 3, strides=2, padding="same"),
                                                                (7, 6, 2)),
                     input_shapes=[("B", 7, 6, 2)], expected_ops=MAX_POOL_OPS, max_nodes=6, run_f64=False),
            Testcase("keras_max_pool_nan", factory=keras_model(_layer("MaxPooling2D", 2), (4, 4, 2)),
                     input_values=[channels_last_with_nan((2, 4, 4, 2))], expected_ops=MAX_POOL_OPS, max_nodes=6, run_f64=False),
            Testcase("keras_max_pool_same_nan", factory=keras_model(_layer("MaxPooling2D", 3, strides=2, padding="same"),
                                                                    (5, 5, 2)),
                     input_values=[channels_last_with_nan((2, 5, 5, 2))], expected_ops=MAX_POOL_OPS, max_nodes=6, run_f64=False),
            Testcase("keras_avg_pool", factory=keras_model(_layer("AveragePooling2D", 2), (6, 6, 2)),
                     input_shapes=[("B", 6, 6, 2)], expected_ops=["AveragePool"], max_nodes=3, run_f64=False),
            Testcase("keras_avg_pool_same", factory=keras_model(_layer("AveragePooling2D", 3, strides=2, padding="same"),
                                                                (5, 6, 2)),
                     input_shapes=[("B", 5, 6, 2)], expected_ops=["AveragePool"], max_nodes=3, run_f64=False),
            Testcase("keras_max_pool_1d_symbolic", factory=keras_model(_layer("MaxPooling1D", 2, padding="same"),
                                                                       (None, 3)),
                     input_shapes=[("B", "T", 3)], static_sizes={"T": 5}, expected_ops=MAX_POOL_OPS, max_nodes=6,
                     run_f64=False),
            Testcase("keras_avg_pool_3d", factory=keras_model(_layer("AveragePooling3D", 2), (4, 4, 4, 2)),
                     input_shapes=[("B", 4, 4, 4, 2)], expected_ops=["AveragePool"], max_nodes=3, run_f64=False),
            Testcase("keras_global_average_2d", factory=keras_model(_layer("GlobalAveragePooling2D"), (3, 4, 5)),
                     input_shapes=[("B", 3, 4, 5)], expected_ops=["ReduceMean"], max_nodes=1, run_f64=False),
            Testcase("keras_global_average_2d_keepdims_channels_first",
                     factory=keras_model(_layer("GlobalAveragePooling2D", keepdims=True, data_format="channels_first"),
                                         (5, 3, 4)),
                     input_shapes=[("B", 5, 3, 4)], expected_ops=["ReduceMean"], max_nodes=1, run_f64=False),
            Testcase("keras_global_average_1d", factory=keras_model(_layer("GlobalAveragePooling1D"), (None, 3)),
                     input_shapes=[("B", "T", 3)], static_sizes={"T": 4}, expected_ops=["ReduceMean"], max_nodes=1,
                     run_f64=False),
            Testcase("keras_conv_pool_stack", factory=keras_model(_conv_pool, (8, 8, 3)), input_shapes=[("B", 8, 8, 3)],
                     check=check_ops("Conv", "MaxPool", "AveragePool", max_transposes=2), run_f64=False),
        ],
    ),
]

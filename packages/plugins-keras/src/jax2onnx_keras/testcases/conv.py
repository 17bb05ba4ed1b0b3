"""Testcases of :mod:`jax2onnx_keras.conv` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from jax2onnx.testing import Component, Testcase

from ._testing import check_ops, keras_model


def _layer(cls_name, *args, **kw):
    def build(keras):
        return getattr(keras.layers, cls_name)(*args, **kw)

    return build


def _cnn(keras):
    L = keras.layers
    return keras.Sequential([
        L.Conv2D(4, 3, padding="same", activation="relu"),
        L.BatchNormalization(),
        L.Conv2D(6, 3, strides=2, padding="same"),
        L.DepthwiseConv2D(3, padding="same", activation="relu6"),
    ])


components = [
    Component(
        name="keras.Conv",
        onnx=["Conv", "Transpose"],
        since="v0.1.0",
        testcases=[
            Testcase("keras_conv2d", factory=keras_model(_layer("Conv2D", 4, 3), (5, 5, 3)),
                     input_shapes=[("B", 5, 5, 3)], expected_ops=["Conv"], max_nodes=3, run_f64=False),
            Testcase("keras_conv2d_same_strided_relu",
                     factory=keras_model(_layer("Conv2D", 4, 3, strides=2, padding="same", activation="relu"),
                                         (6, 7, 3)),
                     input_shapes=[("B", 6, 7, 3)], expected_ops=["Conv", "Relu"], max_nodes=4, run_f64=False),
            Testcase("keras_conv2d_same_symbolic_size",
                     factory=keras_model(_layer("Conv2D", 2, 3, padding="same"), (None, None, 3)),
                     input_shapes=[("B", "H", "W", 3)], static_sizes={"H": 5, "W": 6}, expected_ops=["Conv"],
                     max_nodes=3, run_f64=False),
            Testcase("keras_conv2d_dilated_grouped",
                     factory=keras_model(_layer("Conv2D", 4, 3, dilation_rate=2, groups=2), (7, 7, 4)),
                     input_shapes=[("B", 7, 7, 4)], expected_ops=["Conv"], max_nodes=3, run_f64=False),
            Testcase("keras_conv2d_channels_first",
                     factory=keras_model(_layer("Conv2D", 4, 3, data_format="channels_first"), (3, 5, 5)),
                     input_shapes=[("B", 3, 5, 5)], expected_ops=["Conv"], forbidden_ops=["Transpose"],
                     max_nodes=1, run_f64=False),
            Testcase("keras_conv1d_causal",
                     factory=keras_model(_layer("Conv1D", 3, 3, padding="causal", dilation_rate=2), (None, 2)),
                     input_shapes=[("B", "T", 2)], static_sizes={"T": 6}, expected_ops=["Conv"], max_nodes=3,
                     run_f64=False),
            Testcase("keras_conv3d", factory=keras_model(_layer("Conv3D", 2, 2, padding="same"), (3, 4, 4, 2)),
                     input_shapes=[("B", 3, 4, 4, 2)], expected_ops=["Conv"], max_nodes=3, run_f64=False),
            Testcase("keras_depthwise_conv2d",
                     factory=keras_model(_layer("DepthwiseConv2D", 3, depth_multiplier=2, padding="same"), (5, 5, 3)),
                     input_shapes=[("B", 5, 5, 3)], expected_ops=["Conv"], max_nodes=3, run_f64=False),
            Testcase("keras_separable_conv2d",
                     factory=keras_model(_layer("SeparableConv2D", 5, 3, depth_multiplier=2, padding="same",
                                                activation="relu"), (6, 6, 3)),
                     input_shapes=[("B", 6, 6, 3)], expected_ops=["Conv", "Relu"], max_nodes=5, run_f64=False),
            Testcase("keras_separable_conv1d_strided",
                     factory=keras_model(_layer("SeparableConv1D", 4, 3, strides=2), (9, 2)),
                     input_shapes=[("B", 9, 2)], expected_ops=["Conv"], max_nodes=4, run_f64=False),
            *[
                Testcase(f"keras_conv2d_transpose_{tag}", factory=keras_model(_layer("Conv2DTranspose", 3, k, **kw),
                                                                              (4, 5, 2)),
                         input_shapes=[("B", 4, 5, 2)], expected_ops=["ConvTranspose"], max_nodes=3, run_f64=False)
                for tag, k, kw in (
                    ("valid", 3, {}),
                    ("same_strided", 3, {"strides": 2, "padding": "same"}),
                    ("valid_strided_even", 4, {"strides": 2}),
                    ("output_padding", 3, {"strides": 2, "output_padding": 1}),
                    ("dilated", 2, {"dilation_rate": 2, "padding": "same"}),
                )
            ],
            Testcase("keras_conv1d_transpose", factory=keras_model(_layer("Conv1DTranspose", 2, 3, strides=2,
                                                                          padding="same"), (5, 3)),
                     input_shapes=[("B", 5, 3)], expected_ops=["ConvTranspose"], max_nodes=3, run_f64=False),
            # Conv → BatchNorm → Conv → DepthwiseConv: the inner Transpose pairs cancel.
            Testcase("keras_small_cnn", factory=keras_model(_cnn, (8, 8, 3)), input_shapes=[("B", 8, 8, 3)],
                     check=check_ops("Conv", "BatchNormalization", max_transposes=2), run_f64=False),
        ],
    ),
]

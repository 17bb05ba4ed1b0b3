"""keras.layers.MaxPooling1D/2D/3D, AveragePooling1D/2D/3D → MaxPool / AveragePool.

The kernel, strides and pads cover the spatial axes only (a 3×3 pool is ``kernel_shape=[3, 3]``),
in the channels-first layout ONNX pools in; a channels-last layer gets a Transpose on each side,
which the transpose pass cancels against a neighbouring Conv. ``"same"`` padding is computed as
JAX computes it; Keras averages over the valid pixels only, ONNX's ``count_include_pad=0``.
GlobalAveragePooling1D/2D/3D → one ``ReduceMean`` over the spatial axes.
A window holding a NaN is NaN, as in JAX (``jax2onnx.fusion.max_pool``: onnxruntime's MaxPool skips NaN).
"""

from __future__ import annotations

from typing import Any

from jax2onnx.fusion import MAX_POOL_OPS, Operands, channels_first, is_array, max_pool, same_pads, static_ints
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase, channels_last_with_nan

from ._fusion import call_layer, mark_name, one_output_like, patch, plain_float32
from ._testing import check_ops, keras_model

lowerings = Lowerings()

POOL = "pool"
GLOBAL_AVERAGE = "global_average_pool"


def _patch_pool(original):
    def call(self, inputs, *args, **kwargs):
        if args or kwargs or not is_array(inputs) or inputs.ndim < 3 or self.pool_mode not in ("max", "average"):
            return original(self, inputs, *args, **kwargs)
        return call_layer(POOL, self, lambda layer, x: original(layer, x), {"x": inputs},
                          mode=self.pool_mode, pool_size=tuple(int(k) for k in self.pool_size),
                          strides=tuple(int(s) for s in (self.strides or self.pool_size)),
                          padding=str(self.padding).lower(), channels_last=self.data_format == "channels_last")

    return call


def _patch_global_average(original):
    def call(self, inputs, *args, **kwargs):
        mask = kwargs.get("mask", args[0] if args else None)
        if mask is not None or len(args) > 1 or set(kwargs) - {"mask"} or not is_array(inputs) or inputs.ndim < 3 \
                or not plain_float32(self, inputs):
            return original(self, inputs, *args, **kwargs)
        spatial = tuple(range(1, inputs.ndim - 1)) if self.data_format == "channels_last" else tuple(range(2, inputs.ndim))
        return call_layer(GLOBAL_AVERAGE, self, lambda layer, x: original(layer, x), {"x": inputs},
                          axes=spatial, keepdims=bool(self.keepdims))

    return call


_POOLING = "keras.src.layers.pooling"
patches = [
    patch(f"{_POOLING}.base_pooling", "BasePooling", _patch_pool),
    *[patch(f"{_POOLING}.global_average_pooling{d}d", f"GlobalAveragePooling{d}D", _patch_global_average)
      for d in (1, 2, 3)],
]


@lowerings.register_call(mark_name(POOL))
def lower_pool(ctx, *ins):
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank = len(shape)
    window, strides = tuple(p["pool_size"]), tuple(p["strides"])
    if not one_output_like(ctx, ctx.avals_out[0].shape) or len(window) != rank - 2 or len(strides) != rank - 2:
        return None
    spatial = tuple(shape[1:-1]) if p["channels_last"] else tuple(shape[2:])
    attrs: dict[str, Any] = {"kernel_shape": list(window), "strides": list(strides)}
    if p["padding"] == "same":
        if static_ints(spatial):
            attrs["pads"] = same_pads(spatial, window, strides)
        else:
            attrs["auto_pad"] = "SAME_UPPER"  # JAX's SAME: the odd pixel at the end
    elif p["padding"] != "valid":
        return None
    if p["mode"] == "max":
        dtype = ctx.avals_in[0].dtype
        return channels_first(ctx, ops["x"], rank, p["channels_last"], lambda x: max_pool(ctx, x, dtype, **attrs))
    return channels_first(ctx, ops["x"], rank, p["channels_last"],
                          lambda x: ctx.op.AveragePool(x, count_include_pad=0, **attrs))


@lowerings.register_call(mark_name(GLOBAL_AVERAGE))
def lower_global_average(ctx, *ins):
    """One ReduceMean over the spatial axes, in the layer's own layout (Keras's sum-then-divide
    lowered through ``jnp.mean(dtype=...)`` was ReduceSum + Div)."""
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    if len(ctx.avals_out) != 1 or not one_output_like(ctx, ctx.avals_out[0].shape):
        return None
    return ctx.op.ReduceMean(ops["x"], ctx.i64(list(p["axes"])), keepdims=int(p["keepdims"]))


# ---------------------------------------------------------------------------------------------
# Testcases

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

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

from jax2onnx.fusion import Operands, channels_first, is_array, max_pool, same_pads, static_ints
from jax2onnx.plugin import Lowerings

from ._fusion import (
    call_layer,
    channels_and_spatial,
    mark_name,
    one_output_like,
    patch,
    plain_float32,
    spatial_operands,
)

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
    if (region := spatial_operands(ctx, ins)) is None:
        return None
    ops, p, shape, rank = region
    window, strides = tuple(p["pool_size"]), tuple(p["strides"])
    if len(window) != rank - 2 or len(strides) != rank - 2:
        return None
    _, spatial = channels_and_spatial(p, shape)
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

"""keras.layers.Conv1D/2D/3D (grouped too), DepthwiseConv1D/2D → one ONNX ``Conv`` (bias fused),
SeparableConv1D/2D → depthwise + pointwise ``Conv``, Conv1D/2D/3DTranspose → ``ConvTranspose``, with
the layer's activation as its single op.

ONNX convolves channels-first: a channels-last layer gets one Transpose before and one after the
``Conv``; between two such layers the transpose pass cancels the pair, so a CNN keeps one
Transpose at each edge. The kernel's transpose to ONNX's (out, in/groups, *window) layout is on a
weight, so constant folding stores it transposed. ``"same"`` padding is computed as JAX computes
it (the extra pixel at the end, ONNX's SAME_UPPER), explicitly when the spatial sizes are static.
"""

from __future__ import annotations

from typing import Any

from jax2onnx.fusion import const_array, is_array, reshape_const, same_pads, static_ints, to_nchw, to_nhwc
from jax2onnx.plugin import Lowerings

from ._fusion import (
    call_layer,
    channels_and_spatial,
    mark_name,
    patch,
    plain_float32,
    quantized_or_lora,
    spatial_operands,
)
from .core import activation_name, apply_activation

lowerings = Lowerings()

CONV = "conv"
DEPTHWISE_CONV = "depthwise_conv"
SEPARABLE_CONV = "separable_conv"
CONV_TRANSPOSE = "conv_transpose"


def _static(layer: Any, depthwise: bool) -> dict[str, Any]:
    return {
        "strides": tuple(int(s) for s in layer.strides),
        "dilations": tuple(int(d) for d in layer.dilation_rate),
        "padding": str(layer.padding).lower(),
        "channels_last": layer.data_format == "channels_last",
        "depthwise": depthwise,
    }


def _make(depthwise: bool, mark: str | None = None):
    mark = mark or (DEPTHWISE_CONV if depthwise else CONV)

    def make(original):
        def call(self, inputs, *args, **kwargs):
            act = activation_name(self.activation)
            if (
                args
                or kwargs
                or act is None
                or not is_array(inputs)
                or inputs.ndim < 3
                or quantized_or_lora(self)
                or not plain_float32(self, inputs)
            ):
                return original(self, inputs, *args, **kwargs)
            return call_layer(mark, self, lambda layer, x: original(layer, x), {"x": inputs},
                              activation=act, **_static(self, depthwise))

        return call

    return make


def _patch_conv_transpose(original):
    def call(self, inputs, *args, **kwargs):
        act = activation_name(self.activation)
        pads = None
        if not args and not kwargs and act is not None and is_array(inputs) and inputs.ndim >= 3 \
                and not quantized_or_lora(self) and plain_float32(self, inputs):
            pads = _transpose_pads(self, inputs)
        if pads is None:
            return original(self, inputs, *args, **kwargs)
        return call_layer(CONV_TRANSPOSE, self, lambda layer, x: original(layer, x), {"x": inputs},
                          activation=act, **_static(self, False), lax_padding=pads)

    return call


def _transpose_pads(layer: Any, x: Any) -> tuple[tuple[int, int], ...] | None:
    """The explicit (low, high) padding Keras hands ``lax.conv_transpose`` for this input."""
    from keras.src.backend.common.backend_utils import compute_conv_transpose_padding_args_for_jax

    try:
        pads = compute_conv_transpose_padding_args_for_jax(
            input_shape=x.shape, kernel_shape=layer.kernel.shape, strides=layer.strides, padding=layer.padding,
            output_padding=layer.output_padding, dilation_rate=layer.dilation_rate,
        )
        return tuple((int(lo), int(hi)) for lo, hi in pads)
    except Exception:  # noqa: BLE001 - a Keras version computing it differently: its own code runs
        return None


_CONV = "keras.src.layers.convolutional"
patches = [
    patch(f"{_CONV}.base_conv", "BaseConv", _make(False)),
    patch(f"{_CONV}.conv1d", "Conv1D", _make(False)),  # its own call (causal padding)
    patch(f"{_CONV}.base_depthwise_conv", "BaseDepthwiseConv", _make(True)),
    patch(f"{_CONV}.base_separable_conv", "BaseSeparableConv", _make(True, SEPARABLE_CONV)),
    patch(f"{_CONV}.base_conv_transpose", "BaseConvTranspose", _patch_conv_transpose),
]


def _pads(p: dict[str, Any], spatial: tuple[Any, ...], window: tuple[int, ...]) -> dict[str, Any] | None:
    """ONNX padding attributes for Keras's padding mode, or None when it has no exact form."""
    n = len(window)
    eff = [(k - 1) * d + 1 for k, d in zip(window, p["dilations"])]
    if p["padding"] == "valid":
        return {"pads": [0] * (2 * n)}
    if p["padding"] == "causal":  # Conv1D: everything on the left
        return {"pads": [eff[0] - 1, 0]} if n == 1 else None
    if p["padding"] != "same":
        return None
    if not static_ints(spatial):
        return {"auto_pad": "SAME_UPPER"}  # JAX's SAME: the odd pixel at the end, like SAME_UPPER
    return {"pads": same_pads(spatial, eff, p["strides"])}


@lowerings.register_call(mark_name(CONV))
@lowerings.register_call(mark_name(DEPTHWISE_CONV))
def lower_conv(ctx, *ins):
    if (region := spatial_operands(ctx, ins, "kernel")) is None:
        return None
    ops, p, shape, rank = region
    k_shape = ops.shape("kernel")  # (*window, in / groups, out) ; depthwise: (*window, in, multiplier)
    window = tuple(int(k) for k in k_shape[:-2])
    channels, spatial = channels_and_spatial(p, shape)
    if len(window) != rank - 2 or not static_ints([channels]):
        return None
    pads = _pads(p, spatial, window)
    if pads is None:
        return None
    kernel = ops["kernel"]
    n = len(window)
    if p["depthwise"]:
        groups = int(channels)
        kernel = reshape_const(ctx, kernel, [*window, 1, int(k_shape[-2]) * int(k_shape[-1])])  # as Keras feeds JAX
    else:
        groups = int(channels) // int(k_shape[-2])
    w = ctx.op.Transpose(kernel, perm=[n + 1, n, *range(n)])  # (out, in/groups, *window)
    x = to_nchw(ctx, ops["x"], rank) if p["channels_last"] else ops["x"]
    conv_ins = [x, w] + ([ops["bias"]] if "bias" in ops else [])
    y = ctx.op.Conv(*conv_ins, strides=list(p["strides"]), dilations=list(p["dilations"]), group=groups,
                    kernel_shape=list(window), **pads)
    if p["channels_last"]:
        y = to_nhwc(ctx, y, rank)
    return apply_activation(ctx, y, p["activation"])


@lowerings.register_call(mark_name(SEPARABLE_CONV))
def lower_separable_conv(ctx, *ins):
    """Depthwise ``Conv`` (group = channels) then the pointwise 1×1 ``Conv`` with the bias."""
    if (region := spatial_operands(ctx, ins, "depthwise_kernel", "pointwise_kernel")) is None:
        return None
    ops, p, shape, rank = region
    d_shape, p_shape = ops.shape("depthwise_kernel"), ops.shape("pointwise_kernel")  # (*w, C, m), (1.., C*m, F)
    window = tuple(int(k) for k in d_shape[:-2])
    channels, spatial = channels_and_spatial(p, shape)
    if len(window) != rank - 2 or not static_ints([channels, *d_shape, *p_shape]):
        return None
    pads = _pads(p, spatial, window)
    if pads is None:
        return None
    n = len(window)
    mid = int(d_shape[-2]) * int(d_shape[-1])
    dw = reshape_const(ctx, ops["depthwise_kernel"], [*window, 1, mid])
    dw = ctx.op.Transpose(dw, perm=[n + 1, n, *range(n)])
    pw_shape = [int(p_shape[-1]), mid, *([1] * n)]  # (filters, C*m, 1, ...)
    pw_arr = const_array(ops["pointwise_kernel"], lazy=False)
    if pw_arr is not None:
        pw = ctx.const(pw_arr.reshape(mid, -1).T.reshape(pw_shape))
    else:
        pw = ctx.op.Transpose(ctx.op.Reshape(ops["pointwise_kernel"], ctx.i64([mid, -1])), perm=[1, 0])
        pw = ctx.op.Reshape(pw, ctx.i64(pw_shape))
    x = to_nchw(ctx, ops["x"], rank) if p["channels_last"] else ops["x"]
    y = ctx.op.Conv(x, dw, strides=list(p["strides"]), dilations=list(p["dilations"]), group=int(channels),
                    kernel_shape=list(window), **pads)
    y = ctx.op.Conv(*([y, pw] + ([ops["bias"]] if "bias" in ops else [])), kernel_shape=[1] * n)
    if p["channels_last"]:
        y = to_nhwc(ctx, y, rank)
    return apply_activation(ctx, y, p["activation"])


@lowerings.register_call(mark_name(CONV_TRANSPOSE))
def lower_conv_transpose(ctx, *ins):
    """``lax.conv_transpose(transpose_kernel=True)`` is ONNX's ConvTranspose: the padding Keras
    gives the dilated-input convolution, ``(low, high)``, is ``k_eff - 1 - pad`` on each side in
    ONNX's terms, a negative end pad becoming ``output_padding``."""
    if (region := spatial_operands(ctx, ins, "kernel")) is None:
        return None
    ops, p, shape, rank = region
    k_shape = ops.shape("kernel")  # (*window, filters, in)
    window = tuple(int(k) for k in k_shape[:-2])
    n = len(window)
    if n != rank - 2 or len(p["lax_padding"]) != n:
        return None
    begins, ends, extra = [], [], []
    for (lo, hi), k, d in zip(p["lax_padding"], window, p["dilations"]):
        eff = (k - 1) * d + 1
        b, e = eff - 1 - lo, eff - 1 - hi
        if b < 0:
            return None
        begins.append(b)
        ends.append(max(e, 0))
        extra.append(max(-e, 0))
    if any(x >= s for x, s in zip(extra, p["strides"])):
        return None  # ONNX requires output_padding < stride
    w = ctx.op.Transpose(ops["kernel"], perm=[n + 1, n, *range(n)])  # (in, filters, *window)
    x = to_nchw(ctx, ops["x"], rank) if p["channels_last"] else ops["x"]
    attrs: dict[str, Any] = {"strides": list(p["strides"]), "dilations": list(p["dilations"]),
                             "kernel_shape": list(window), "pads": begins + ends}
    if any(extra):
        attrs["output_padding"] = extra
    y = ctx.op.ConvTranspose(*([x, w] + ([ops["bias"]] if "bias" in ops else [])), **attrs)
    if p["channels_last"]:
        y = to_nhwc(ctx, y, rank)
    return apply_activation(ctx, y, p["activation"])

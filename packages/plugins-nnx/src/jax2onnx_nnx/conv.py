"""nnx.Conv, nnx.ConvTranspose → Conv / ConvTranspose (bias fused), channels-last at the edges.

flax works in NHWC, ONNX in NCHW: the input is transposed in, the output back out, and the kernel
(a constant) is folded into ONNX's (O, I, spatial) / (I, O, spatial) layout. Between consecutive
layers the back-and-forth Transposes meet and the TransposeCancelPass removes them, so a stack of
convolutions keeps one Transpose at each edge of the model.

The explicit padding is read from the region's body, i.e. from flax/lax themselves (``SAME`` with
strides, ``conv_transpose``'s own padding rule), rather than re-derived here. Configurations ONNX
cannot express in one op (input dilation, kernel masks, circular/reflect/causal padding, extra
batch dims) are left to flax's code and the lax lowerings; so is float64, for which onnxruntime has
no Conv kernel (the lax pack lowers it exactly with Einsum).
"""

from __future__ import annotations

import jax
from jax2onnx.fusion import (
    conv_padding_mode,
    ints_per_axis,
    lower_conv_channels_last,
    lower_conv_transpose_channels_last,
)
from jax2onnx.plugin import Lowerings, ModulePatch, is_array

from ._fusion import call_module, graphdef_node_types

lowerings = Lowerings()

CONV = "jax2onnx_nnx.conv"
CONV_TRANSPOSE = "jax2onnx_nnx.conv_transpose"


def _plain(args: tuple, kwargs: dict) -> bool:
    return not args and all(v is None for v in kwargs.values())


# ---------------------------------------------------------------------------------------------
# Patches


def _patch_conv(original):
    def __call__(self, x, *args, **kwargs):
        n = len(self.kernel_size)
        mode = conv_padding_mode(self.padding)
        if (
            not _plain(args, kwargs)
            or not is_array(x)
            or x.ndim != n + 2  # flax folds/adds batch dims with reshapes around the conv
            or mode is None
            or getattr(self, "mask", None) is not None
            or any(d != 1 for d in ints_per_axis(self.input_dilation, n))
            or getattr(self, "conv_general_dilated", jax.lax.conv_general_dilated)
            is not jax.lax.conv_general_dilated
        ):
            return original(self, x, *args, **kwargs)
        return call_module(CONV, self, lambda m, x: original(m, x), {"x": x}, padding_mode=mode)

    return __call__


def _patch_conv_transpose(original):
    def __call__(self, x, *args, **kwargs):
        n = len(self.kernel_size)
        mode = conv_padding_mode(self.padding)
        if not _plain(args, kwargs) or not is_array(x) or x.ndim != n + 2 or mode is None or self.mask is not None:
            return original(self, x, *args, **kwargs)
        return call_module(CONV_TRANSPOSE, self, lambda m, x: original(m, x), {"x": x}, padding_mode=mode,
                           transpose_kernel=bool(getattr(self, "transpose_kernel", False)))

    return __call__


patches = [
    ModulePatch("flax.nnx.Conv", "__call__", _patch_conv, holders=graphdef_node_types),
    ModulePatch("flax.nnx.ConvTranspose", "__call__", _patch_conv_transpose, holders=graphdef_node_types),
]


# ---------------------------------------------------------------------------------------------
# Lowerings: the kit's channels-last convolutions (operands x, kernel, bias as flax names them)

lowerings.add(f"call:{CONV}", lower_conv_channels_last)
lowerings.add(f"call:{CONV_TRANSPOSE}", lower_conv_transpose_channels_last)

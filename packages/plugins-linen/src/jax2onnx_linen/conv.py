"""nn.Conv, nn.ConvTranspose → Conv / ConvTranspose (bias fused), channels-last at the edges.

flax works in NHWC, ONNX in NCHW: the input is transposed in, the output back out, and the kernel
(a constant) is folded into ONNX's (O, I, spatial) / (I, O, spatial) layout. Between consecutive
layers the back-and-forth Transposes meet and core's TransposeCancelPass removes them, so a stack
of convolutions keeps one Transpose at each edge of the model.

The explicit padding is read from the region's body, i.e. from flax/lax themselves (``SAME`` with
strides, ``conv_transpose``'s own padding rule), rather than re-derived here. What ONNX cannot
express in one op (input dilation, kernel masks, CIRCULAR/CAUSAL padding, unbatched or multi-batch
inputs, ``nn.ConvLocal``'s unshared weights) is left to flax's code and the lax lowerings; so is
float64, for which onnxruntime has no Conv kernel.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from jax2onnx.fusion import (
    conv_padding_mode,
    ints_per_axis,
    is_array,
    lower_conv_channels_last,
    lower_conv_transpose_channels_last,
)
from jax2onnx.plugin import Lowerings, ModulePatch

from ._fusion import call_module, fusable, linen_calls

lowerings = Lowerings()

CONV = "jax2onnx_linen.conv"
CONV_TRANSPOSE = "jax2onnx_linen.conv_transpose"


def _kernel_rank(module: Any) -> int:
    ks = module.kernel_size
    return 1 if isinstance(ks, (int, np.integer)) else len(ks)


def _patch_conv(original):
    def __call__(self, inputs, *args, **kwargs):
        n = _kernel_rank(self)
        mode = conv_padding_mode(self.padding)
        if (
            args
            or kwargs
            or not is_array(inputs)
            or inputs.ndim != n + 2  # flax adds/folds batch dims with reshapes around the conv
            or mode is None
            or self.mask is not None
            or any(d != 1 for d in ints_per_axis(self.input_dilation, n))
            or self.conv_general_dilated not in (None, jax.lax.conv_general_dilated)
            or getattr(self, "conv_general_dilated_cls", None) is not None
            or not fusable(self)
        ):
            return original(self, inputs, *args, **kwargs)
        return call_module(CONV, self, lambda m, x: original(m, x), {"x": inputs}, padding_mode=mode)

    return __call__


def _patch_conv_transpose(original):
    def __call__(self, inputs, *args, **kwargs):
        n = _kernel_rank(self)
        mode = conv_padding_mode(self.padding)
        if (args or kwargs or not is_array(inputs) or inputs.ndim != n + 2 or mode is None or self.mask is not None
                or getattr(self, "preferred_element_type", None) is not None or not fusable(self)):
            return original(self, inputs, *args, **kwargs)
        return call_module(CONV_TRANSPOSE, self, lambda m, x: original(m, x), {"x": inputs}, padding_mode=mode,
                           transpose_kernel=bool(self.transpose_kernel))

    return __call__


patches = [
    ModulePatch("flax.linen.Conv", "__call__", _patch_conv, interceptor=linen_calls),
    ModulePatch("flax.linen.ConvTranspose", "__call__", _patch_conv_transpose, interceptor=linen_calls),
]


# ---------------------------------------------------------------------------------------------
# Lowerings: the kit's channels-last convolutions (operands x, kernel, bias as flax names them)

lowerings.add(f"call:{CONV}", lower_conv_channels_last)
lowerings.add(f"call:{CONV_TRANSPOSE}", lower_conv_transpose_channels_last)

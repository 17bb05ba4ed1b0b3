"""nnx.InstanceNorm → InstanceNormalization (statistics per sample and channel over the spatial axes).

flax normalises channels-last input over every axis but the batch and feature axes; ONNX wants
(N, C, spatial...), so a channels-last input is transposed in and out (the TransposeCancelPass
removes such pairs between layers). onnxruntime's InstanceNormalization is float32/float16 only:
float64 is left to the lax decomposition.
"""

from __future__ import annotations

from jax2onnx.fusion import lower_instance_norm, norm_axes
from jax2onnx.plugin import Lowerings, ModulePatch, is_array

from ._fusion import call_module, graphdef_node_types
from .normalization import _plain_call

lowerings = Lowerings()

INSTANCE_NORM = "jax2onnx_nnx.instance_norm"


def _patch_instance_norm(original):
    def __call__(self, x, *args, **kwargs):
        if not _plain_call(args, kwargs) or getattr(self, "axis_name", None) is not None or not is_array(x) or x.ndim < 3:
            return original(self, x, *args, **kwargs)
        return call_module(INSTANCE_NORM, self, lambda m, x: original(m, x), {"x": x},
                           feature_axes=norm_axes(self.feature_axes, x.ndim), epsilon=float(self.epsilon))

    return __call__


patches = [ModulePatch("flax.nnx.InstanceNorm", "__call__", _patch_instance_norm, holders=graphdef_node_types)]  # skipped where flax lacks it


lowerings.add(f"call:{INSTANCE_NORM}", lower_instance_norm)

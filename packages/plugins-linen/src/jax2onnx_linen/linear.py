"""nn.Dense, nn.DenseGeneral, nn.Einsum → Gemm / MatMul + Add / Einsum.

A 2-D input becomes one ``Gemm`` (bias fused); higher ranks become ``MatMul`` + ``Add``, which
broadcast over the leading axes without any Reshape around them. DenseGeneral over several
trailing axes (or with several output axes) flattens them with a ``Reshape`` whose target uses
ONNX's ``0`` (copy this dim), so symbolic batch dims need no Shape ops. DenseGeneral with
``batch_dims`` or contracting non-trailing axes, and custom ``dot_general`` (quantised) modules,
are left to flax's own code.
"""

from __future__ import annotations

from typing import Any

import jax
from jax2onnx.fusion import (
    is_array,
    lower_dense,
    lower_dense_general,
    lower_einsum_bias,
)
from jax2onnx.plugin import Lowerings, ModulePatch

from ._fusion import call_module, fusable, linen_calls

lowerings = Lowerings()

DENSE = "jax2onnx_linen.dense"
DENSE_GENERAL = "jax2onnx_linen.dense_general"
EINSUM = "jax2onnx_linen.einsum"


def _default_dot(module: Any) -> bool:
    """The module multiplies with ``lax.dot_general`` (not a user-supplied, e.g. quantised, one)."""
    dot = getattr(module, "dot_general", None)
    return dot in (None, jax.lax.dot_general) and getattr(module, "dot_general_cls", None) is None


def _patch_dense(original):
    def __call__(self, inputs, *args, **kwargs):
        if args or kwargs or not is_array(inputs) or inputs.ndim < 1 or not _default_dot(self) or not fusable(self):
            return original(self, inputs, *args, **kwargs)
        return call_module(DENSE, self, lambda m, x: original(m, x), {"x": inputs})

    return __call__


def _patch_dense_general(original):
    def __call__(self, inputs, *args, **kwargs):
        if (args or kwargs or not is_array(inputs) or not _default_dot(self) or tuple(self.batch_dims)
                or not fusable(self)):
            return original(self, inputs, *args, **kwargs)
        axis = self.axis if isinstance(self.axis, (tuple, list)) else (self.axis,)
        features = self.features if isinstance(self.features, (tuple, list)) else (self.features,)
        axes = tuple(int(a) % inputs.ndim for a in axis)
        return call_module(DENSE_GENERAL, self, lambda m, x: original(m, x), {"x": inputs},
                           axes=axes, out_features=tuple(int(f) for f in features))

    return __call__


def _patch_einsum(original):
    def __call__(self, inputs, einsum_str=None, *args, **kwargs):
        equation = (einsum_str if einsum_str is not None else self.einsum_str or "").replace(" ", "")
        if (args or kwargs or not is_array(inputs) or equation.count(",") != 1 or "->" not in equation
                or getattr(self, "preferred_element_type", None) is not None or not fusable(self)):
            return original(self, inputs, einsum_str, *args, **kwargs)
        bias_shape = None
        if self.use_bias:
            try:  # flax's own rule for where the bias broadcasts into the output
                kernel = self.variables["params"]["kernel"]
                bias_shape = tuple(int(d) for d in self._get_bias_shape(equation, inputs, kernel)[1])
            except Exception:  # noqa: BLE001 - unknown flax internals: let its code run as is
                return original(self, inputs, einsum_str, *args, **kwargs)
        return call_module(EINSUM, self, lambda m, x: original(m, x, einsum_str), {"x": inputs},
                           equation=equation, bias_shape=bias_shape)

    return __call__


patches = [
    ModulePatch("flax.linen.Dense", "__call__", _patch_dense, interceptor=linen_calls),
    ModulePatch("flax.linen.DenseGeneral", "__call__", _patch_dense_general, interceptor=linen_calls),
    ModulePatch("flax.linen.Einsum", "__call__", _patch_einsum, interceptor=linen_calls),
]


# ---------------------------------------------------------------------------------------------
# Lowerings


lowerings.add(f"call:{DENSE}", lower_dense)
lowerings.add(f"call:{DENSE_GENERAL}", lower_dense_general)
lowerings.add(f"call:{EINSUM}", lower_einsum_bias)

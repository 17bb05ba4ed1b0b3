"""nnx.Linear, LinearGeneral, Einsum, LoRA, LoRALinear → Gemm / MatMul + Add / Einsum.

A 2-D input becomes one ``Gemm`` (bias fused); higher ranks become ``MatMul`` + ``Add``, which
broadcast over the leading axes without any Reshape/Shape/Concat around them. LinearGeneral with
several contracting or output axes flattens them with a ``Reshape`` whose target uses ONNX's ``0``
(copy this dim), so symbolic batch dims need no Shape ops. LoRALinear merges ``W + A @ B`` into one
weight when the weights are constants, as one would deploy a LoRA model.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.fusion import (
    Operands,
    const_array,
    lower_dense,
    lower_dense_general,
    lower_einsum_bias,
    matmul_bias,
    one_output_like,
)
from jax2onnx.plugin import Lowerings, ModulePatch, is_array

from ._fusion import call_module, graphdef_node_types

lowerings = Lowerings()

LINEAR = "jax2onnx_nnx.linear"
LINEAR_GENERAL = "jax2onnx_nnx.linear_general"
EINSUM = "jax2onnx_nnx.einsum"
LORA = "jax2onnx_nnx.lora"
LORA_LINEAR = "jax2onnx_nnx.lora_linear"


def _default_dot(module: Any) -> bool:
    """The module multiplies with ``lax.dot_general`` (not a user-supplied, e.g. quantised, one)."""
    dot = getattr(module, "dot_general", None)
    return dot in (None, jax.lax.dot_general) and getattr(module, "dot_general_cls", None) is None


def _no_extras(args: tuple, kwargs: dict) -> bool:
    return not args and all(v is None for v in kwargs.values())


# ---------------------------------------------------------------------------------------------
# Patches


def _patch_dense(mark):
    """Linear and LoRALinear: a plain call with the default dot product, as region ``mark``."""

    def patch_call(original):
        def __call__(self, x, *args, **kwargs):
            if not _no_extras(args, kwargs) or not is_array(x) or x.ndim < 1 or not _default_dot(self):
                return original(self, x, *args, **kwargs)
            return call_module(mark, self, lambda m, x: original(m, x), {"x": x})

        return __call__

    return patch_call


def _patch_linear_general(original):
    def __call__(self, x, *args, **kwargs):
        if not _no_extras(args, kwargs) or not is_array(x) or not _default_dot(self) or self.batch_axis:
            return original(self, x, *args, **kwargs)
        axes = tuple(int(a) % x.ndim for a in self.axis)
        return call_module(LINEAR_GENERAL, self, lambda m, x: original(m, x), {"x": x},
                           axes=axes, out_features=tuple(self.out_features))

    return __call__


def _patch_einsum(original):
    def __call__(self, x, einsum_str=None, *args, **kwargs):
        equation = (einsum_str if einsum_str is not None else self.einsum_str or "").replace(" ", "")
        if (
            not _no_extras(args, kwargs)
            or not is_array(x)
            # the layer's own einsum_op, when the user gave one, is not the library's: its code runs
            or getattr(self, "einsum_op", jnp.einsum) is not jnp.einsum
            or equation.count(",") != 1
            or "->" not in equation
        ):
            return original(self, x, einsum_str, *args, **kwargs)
        bias_shape = None
        if self.bias is not None:
            try:  # flax's own rule for where the bias broadcasts into the output
                bias_shape = tuple(int(d) for d in self._infer_broadcasted_bias_shape(equation, x, self.kernel))
            except Exception:  # noqa: BLE001 - unknown flax internals: let its code run as is
                return original(self, x, einsum_str, *args, **kwargs)
        return call_module(EINSUM, self, lambda m, x: original(m, x, einsum_str), {"x": x},
                           equation=equation, bias_shape=bias_shape)

    return __call__


def _patch_lora(original):
    def __call__(self, x, **kwargs):
        if self.base_module is not None or kwargs or not is_array(x):
            return original(self, x, **kwargs)
        return call_module(LORA, self, lambda m, x: original(m, x), {"x": x})

    return __call__


patches = [
    ModulePatch("flax.nnx.Linear", "__call__", _patch_dense(LINEAR), holders=graphdef_node_types),
    ModulePatch("flax.nnx.LinearGeneral", "__call__", _patch_linear_general, holders=graphdef_node_types),
    ModulePatch("flax.nnx.Einsum", "__call__", _patch_einsum, holders=graphdef_node_types),
    ModulePatch("flax.nnx.LoRA", "__call__", _patch_lora, holders=graphdef_node_types),
    ModulePatch("flax.nnx.LoRALinear", "__call__", _patch_dense(LORA_LINEAR), holders=graphdef_node_types),
]


# ---------------------------------------------------------------------------------------------
# Lowerings


lowerings.add(f"call:{LINEAR}", lower_dense)
lowerings.add(f"call:{LINEAR_GENERAL}", lower_dense_general)
lowerings.add(f"call:{EINSUM}", lower_einsum_bias)


@lowerings.register_call(LORA)
def lower_lora(ctx, *ins):
    ops = Operands(ctx, ins)
    x_shape = ops.shape("x")
    if not one_output_like(ctx, (*x_shape[:-1], ops.shape("lora_b")[-1])):
        return None
    dtype = ctx.avals_out[0].dtype
    a, b = ctx.cast(ops["lora_a"], dtype), ctx.cast(ops["lora_b"], dtype)
    return ctx.op.MatMul(ctx.op.MatMul(ctx.cast(ops["x"], dtype), a), b)


@lowerings.register_call(LORA_LINEAR)
def lower_lora_linear(ctx, *ins):
    ops = Operands(ctx, ins)
    x_shape = ops.shape("x")
    if not one_output_like(ctx, (*x_shape[:-1], ops.shape("kernel")[-1])) or "lora/lora_a" not in ops:
        return None
    dtype = ctx.avals_out[0].dtype
    x = ctx.cast(ops["x"], dtype)
    bias = ctx.cast(ops["bias"], dtype) if "bias" in ops else None
    w, a, b = (const_array(ops[n]) for n in ("kernel", "lora/lora_a", "lora/lora_b"))
    if w is not None and a is not None and b is not None:
        wide = np.result_type(w, a, b, np.dtype(dtype))
        merged = w.astype(wide) + a.astype(wide) @ b.astype(wide)
        return matmul_bias(ctx, x, ctx.const(merged.astype(dtype)), bias, len(x_shape))
    base = matmul_bias(ctx, x, ctx.cast(ops["kernel"], dtype), bias, len(x_shape))
    low_rank = ctx.op.MatMul(ctx.op.MatMul(x, ctx.cast(ops["lora/lora_a"], dtype)),
                             ctx.cast(ops["lora/lora_b"], dtype))
    return ctx.op.Add(base, low_rank)

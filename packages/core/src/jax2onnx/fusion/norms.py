"""The normalizations: LayerNorm, RMSNorm, BatchNorm, GroupNorm, InstanceNorm."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from .conv import channels_first
from .operands import Operands, const_array, find_eqns, one_output_like, region_body, reshape_const, static_ints

# ---------------------------------------------------------------------------------------------
# Normalization


def norm_axes(axes: Any, ndim: int) -> tuple[int, ...]:
    """Axes (an int or several, negative allowed) as sorted non-negative ints: a static param."""
    if isinstance(axes, (int, np.integer)):
        axes = (axes,)
    return tuple(sorted({int(a) % ndim for a in axes}))


def stash_type(ctx: Any, dtype: Any) -> int:
    """Statistics precision: computed in at least float32, and in float64 for float64."""
    return int(ctx.onnx_dtype(np.float64 if np.dtype(dtype) == np.float64 else np.float32))


def norm_weight(ctx: Any, ops: Operands, name: str, shape: Sequence[Any], dtype: Any,
                default: float | None) -> ir.Value | None:
    """A per-feature weight as ``dtype``, reshaped to ``shape``; ``default`` fills a missing one
    (None: omit it)."""
    v = ops.get(name)
    if v is None:
        return None if default is None else ctx.const(np.full(list(shape), default, dtype=dtype))
    v = ctx.cast(v, dtype)
    return v if list(ops.shape(name)) == list(shape) else reshape_const(ctx, v, shape)


def _trailing_norm(ctx: Any, ins: Sequence[ir.Value], with_bias: bool) -> tuple[Any, ...] | None:
    """Common part of LayerNorm and RMSNorm: (x, scale, bias, axis) or None to decline."""
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank = len(shape)
    red, feat = p["reduction_axes"], p["feature_axes"]
    if not one_output_like(ctx, shape) or not red:
        return None
    start = red[0]
    # ONNX normalises over the trailing axes [axis, rank) with weights broadcast over them.
    if tuple(red) != tuple(range(start, rank)) or not set(feat) <= set(red):
        return None
    dtype = ctx.avals_out[0].dtype
    wshape = [shape[a] if a in feat else 1 for a in range(start, rank)]
    if not static_ints(wshape):
        return None
    x = ctx.cast(ops["x"], dtype)
    scale = norm_weight(ctx, ops, "scale", wshape, dtype, 1.0)
    bias = norm_weight(ctx, ops, "bias", wshape, dtype, None) if with_bias else None
    return x, scale, bias, start


def lower_layer_norm(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """A layer-norm region (params ``reduction_axes``, ``feature_axes``, ``epsilon``; operands
    ``x``, optional ``scale``/``bias``) over trailing axes → LayerNormalization."""
    parts = _trailing_norm(ctx, ins, with_bias=True)
    if parts is None:
        return None
    x, scale, bias, axis = parts
    return ctx.op.LayerNormalization(x, scale, bias, axis=axis, epsilon=ctx.marked.params["epsilon"],
                                     stash_type=stash_type(ctx, ctx.avals_out[0].dtype))


def lower_rms_norm(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """An RMS-norm region (as :func:`lower_layer_norm`, no bias) → RMSNormalization (opset 23)."""
    if np.dtype(ctx.avals_out[0].dtype) not in ctx.kernel_dtypes("RMSNormalization"):  # none before opset 23
        return None
    parts = _trailing_norm(ctx, ins, with_bias=False)
    if parts is None:
        return None
    x, scale, _, axis = parts
    return ctx.op.RMSNormalization(x, scale, axis=axis, epsilon=ctx.marked.params["epsilon"],
                                   stash_type=stash_type(ctx, ctx.avals_out[0].dtype))


def _low_precision_multiplier(ops: Operands, low: np.dtype, epsilon: float) -> np.ndarray | None:
    """``rsqrt(var + eps) * scale`` evaluated by JAX in ``low``, as the region's body does."""
    import jax
    import jax.numpy as jnp

    var = const_array(ops.get("var"))
    scale = const_array(ops.get("scale")) if "scale" in ops else None
    if var is None or ("scale" in ops and scale is None):
        return None
    var = jnp.asarray(var, low)
    scale = None if scale is None else jnp.asarray(scale, low)

    # Jitted over closed-over constants, as the library's model is when it runs jitted with its
    # weights: XLA then folds rsqrt at compile time, which rounds up to one ulp away from its
    # runtime kernel and from the eager op (seen with flax 0.10.6 under float64).
    @jax.jit
    def multiplier() -> Any:
        mul = jax.lax.rsqrt(var + epsilon)
        return mul if scale is None else mul * scale

    return np.asarray(multiplier()).reshape(-1)


def lower_batch_norm(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """An inference batch-norm region (params ``feature_axes`` (one axis), ``epsilon``; operands
    ``x``, ``mean``, ``var``, optional ``scale``/``bias``) → BatchNormalization, transposed for a
    channels-last input."""
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank = len(shape)
    feat = p["feature_axes"]
    if not one_output_like(ctx, shape) or rank < 2 or len(feat) != 1 or "mean" not in ops or "var" not in ops:
        return None
    axis = feat[0]
    # ONNX puts channels at axis 1: (N, C) and (N, C, ...) as they are, channels-last transposed.
    if axis != 1 and axis != rank - 1:
        return None
    channels = shape[axis]
    dtype = np.dtype(ctx.avals_out[0].dtype)
    x = ctx.cast(ops["x"], dtype)
    scale = norm_weight(ctx, ops, "scale", [channels], dtype, 1.0)
    bias = norm_weight(ctx, ops, "bias", [channels], dtype, 0.0)
    mean = norm_weight(ctx, ops, "mean", [channels], dtype, 0.0)
    var = norm_weight(ctx, ops, "var", [channels], dtype, 1.0)
    epsilon = p["epsilon"]
    found = find_eqns(region_body(ctx), "rsqrt")
    low = np.dtype(found[0].invars[0].aval.dtype) if found else None
    if low is not None and low != dtype:
        # The library computes rsqrt(var + eps) * scale in its statistics' precision (float32 under
        # a float64 export, as flax does); fold that multiplier, rounded as it rounds it, into the scale.
        multiplier = _low_precision_multiplier(ops, low, epsilon)
        if multiplier is None:
            return None
        scale = ctx.const(multiplier.astype(dtype))
        var, epsilon = ctx.const(np.ones([channels], dtype=dtype)), 0.0
    return channels_first(ctx, x, rank, axis != 1,
                           lambda v: ctx.op.BatchNormalization(v, scale, bias, mean, var, epsilon=epsilon))


def lower_group_norm(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """A channels-last group-norm region (params ``num_groups``, ``epsilon``; operands ``x``,
    optional per-channel ``scale``/``bias``) → GroupNormalization (opset 21)."""
    if not ctx.has_op("GroupNormalization"):  # per-channel scale/bias: none before opset 21 (-18 scaled per group)
        return None
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    shape = ops.shape("x")
    rank = len(shape)
    if not one_output_like(ctx, shape):
        return None
    channels = shape[-1]
    dtype = ctx.avals_out[0].dtype
    x = ctx.cast(ops["x"], dtype)
    scale = norm_weight(ctx, ops, "scale", [channels], dtype, 1.0)
    bias = norm_weight(ctx, ops, "bias", [channels], dtype, 0.0)
    return channels_first(ctx, x, rank, rank > 2, lambda v: ctx.op.GroupNormalization(
        v, scale, bias, num_groups=p["num_groups"], epsilon=p["epsilon"], stash_type=stash_type(ctx, dtype)))


def lower_instance_norm(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """An instance-norm region (params ``feature_axes`` (axis 1 or last), ``epsilon``; operands
    ``x``, optional ``scale``/``bias``) → InstanceNormalization."""
    ops = Operands(ctx, ins)
    shape = ops.shape("x")
    rank = len(shape)
    feat = ctx.marked.params["feature_axes"]
    dtype = np.dtype(ctx.avals_out[0].dtype)
    if dtype not in ctx.kernel_dtypes("InstanceNormalization", exact=True) or not one_output_like(ctx, shape) or len(feat) != 1 or feat[0] not in (1, rank - 1):
        return None
    channels = shape[feat[0]]
    x = ctx.cast(ops["x"], dtype)
    scale = norm_weight(ctx, ops, "scale", [channels], dtype, 1.0)
    bias = norm_weight(ctx, ops, "bias", [channels], dtype, 0.0)
    return channels_first(ctx, x, rank, feat[0] != 1, lambda v: ctx.op.InstanceNormalization(
        v, scale, bias, epsilon=ctx.marked.params["epsilon"]))



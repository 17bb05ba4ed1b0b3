"""Channels-last layout and convolutions read from the body's ``conv_general_dilated``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir

from .operands import Operands, const_array, find_eqns, one_output_like, region_body, static_ints

# ---------------------------------------------------------------------------------------------
# Layout


def to_nchw(ctx: Any, x: ir.Value, rank: int) -> ir.Value:
    """Channels-last (N, *spatial, C) to ONNX's channels-first (N, C, *spatial)."""
    return ctx.op.Transpose(x, perm=[0, rank - 1, *range(1, rank - 1)])


def to_nhwc(ctx: Any, y: ir.Value, rank: int) -> ir.Value:
    """Back from (N, C, *spatial) to (N, *spatial, C)."""
    return ctx.op.Transpose(y, perm=[0, *range(2, rank), 1])


def channels_first(ctx: Any, x: ir.Value, rank: int, channels_last: bool, op: Callable[[ir.Value], ir.Value]) -> ir.Value:
    """``op`` (a channels-first ONNX op) applied in ONNX's layout, transposing in and out when the
    layer is channels-last (the transpose pass cancels the pairs between layers)."""
    if not channels_last:
        return op(x)
    return to_nhwc(ctx, op(to_nchw(ctx, x, rank)), rank)


# ---------------------------------------------------------------------------------------------
# Convolution: the body's ``conv_general_dilated`` says strides, dilation, groups and padding


def ints_per_axis(v: Any, n: int) -> tuple[int, ...]:
    """A per-spatial-axis setting (strides, dilation) as ``n`` ints: None is all ones, an int repeats."""
    if v is None:
        return (1,) * n
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    return tuple(int(d) for d in v)


def conv_padding_mode(padding: Any) -> str | None:
    """A convolution's padding as the static param :func:`conv_pads` reads: ``"SAME"``,
    ``"SAME_LOWER"``, ``"VALID"`` or ``"EXPLICIT"`` (pairs); None for what ONNX cannot express
    (``"CIRCULAR"``, ``"CAUSAL"``, ...)."""
    if isinstance(padding, str):
        return padding if padding in ("SAME", "SAME_LOWER", "VALID") else None
    return "EXPLICIT"


def body_conv(ctx: Any) -> Any | None:
    """The region's one ``conv_general_dilated`` equation, when it is the forward call."""
    found = find_eqns(region_body(ctx), "conv_general_dilated")
    if len(found) != 1:
        return None
    eqn = found[0]
    if eqn.params.get("batch_group_count", 1) != 1 or not one_output_like(ctx, eqn.outvars[0].aval.shape):
        return None
    return eqn


def conv_pads(eqn: Any, padding_mode: str | None) -> dict[str, Any] | None:
    """``pads`` from the body's padding, or ``auto_pad`` when the spatial sizes are symbolic (ONNX
    then computes SAME padding itself, as lax does); None for a crop or an unexpressible mode."""
    padding = eqn.params["padding"]
    if static_ints([d for pair in padding for d in pair]):
        if any(int(d) < 0 for pair in padding for d in pair):  # a crop: not a Conv pad
            return None
        return {"pads": [int(lo) for lo, _ in padding] + [int(hi) for _, hi in padding]}
    auto_pad = {"SAME": "SAME_UPPER", "SAME_LOWER": "SAME_LOWER", "VALID": "VALID"}.get(padding_mode or "")
    return None if auto_pad is None else {"auto_pad": auto_pad}


def conv_attrs(eqn: Any) -> dict[str, Any]:
    """Conv's strides, dilations and group from the body's equation."""
    return {"strides": [int(s) for s in eqn.params["window_strides"]],
            "dilations": [int(d) for d in eqn.params["rhs_dilation"]],
            "group": int(eqn.params["feature_group_count"])}


def _conv_region(ctx: Any, ins: tuple[ir.Value, ...], op_type: str, unit_param: str) -> tuple | None:
    """What both channels-last conv lowerings start from: (dtype, the body's conv equation, the
    operands, rank, spatial rank), or None (keep the lax path) when onnxruntime has no ``op_type``
    kernel for the dtype, the body has no single conv, or its ``unit_param`` (the dilation/stride
    the ONNX op cannot express) is not all ones."""
    dtype = np.dtype(ctx.avals_out[0].dtype)
    if dtype not in ctx.kernel_dtypes(op_type):
        return None
    eqn = body_conv(ctx)
    if eqn is None or any(d != 1 for d in eqn.params[unit_param]):
        return None
    ops = Operands(ctx, ins)
    rank = len(ops.shape("x"))
    return dtype, eqn, ops, rank, rank - 2


def lower_conv_channels_last(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """A channels-last convolution region (operands ``x`` (N, *spatial, C), ``kernel`` (*spatial, I, O),
    optional ``bias``; param ``padding_mode``) → Transpose, Conv with the bias, Transpose."""
    region = _conv_region(ctx, ins, "Conv", unit_param="lhs_dilation")
    if region is None:
        return None
    dtype, eqn, ops, rank, n = region
    pads = conv_pads(eqn, ctx.marked.params.get("padding_mode"))
    if pads is None:
        return None
    kernel = ctx.op.Transpose(ctx.cast(ops["kernel"], dtype), perm=[n + 1, n, *range(n)])  # HWIO → OIHW
    bias = ctx.cast(ops["bias"], dtype) if "bias" in ops else None
    y = ctx.op.Conv(to_nchw(ctx, ctx.cast(ops["x"], dtype), rank), kernel, bias, **conv_attrs(eqn), **pads)
    return to_nhwc(ctx, y, rank)


def _transposed_kernel(ctx: Any, ops: Operands, dtype: Any, n: int, transpose_kernel: bool) -> ir.Value:
    """The kernel in ConvTranspose's (I, O, spatial) layout.

    ``lax.conv_transpose`` convolves the stride-dilated input with the kernel as given (HWIO) unless
    ``transpose_kernel`` (then flipped and I/O-swapped); ONNX's ConvTranspose is the gradient of
    Conv, i.e. that convolution with the spatially flipped kernel.
    """
    perm = [n + 1, n, *range(n)] if transpose_kernel else [n, n + 1, *range(n)]
    arr = const_array(ops["kernel"])
    if arr is not None:
        w = np.transpose(arr, perm)
        if not transpose_kernel:
            w = w[(slice(None), slice(None), *[slice(None, None, -1)] * n)]
        return ctx.const(np.ascontiguousarray(w).astype(dtype))
    w = ctx.op.Transpose(ctx.cast(ops["kernel"], dtype), perm=perm)
    if transpose_kernel:
        return w
    # every spatial axis reversed: starts -1, ends "past the front", steps -1
    reverse = ctx.i64([-1] * n)
    return ctx.op.Slice(w, reverse, ctx.i64([np.iinfo(np.int64).min] * n), ctx.i64(range(2, n + 2)), reverse)


def lower_conv_transpose_channels_last(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """A channels-last ``lax.conv_transpose`` region (operands ``x``, ``kernel`` (*spatial, I, O),
    optional ``bias``; param ``transpose_kernel``) → Transpose, ConvTranspose, Transpose."""
    region = _conv_region(ctx, ins, "ConvTranspose", unit_param="window_strides")
    if region is None:
        return None
    dtype, eqn, ops, rank, n = region
    ksize = ops.shape("kernel")[:n]
    dilation = [int(d) for d in eqn.params["rhs_dilation"]]
    padding = eqn.params["padding"]
    if eqn.params["feature_group_count"] != 1 or not static_ints([d for pair in padding for d in pair]):
        return None
    # A conv over the stride-dilated input padded by (lo, hi) is ConvTranspose with pads
    # k_eff - 1 - lo / k_eff - 1 - hi; extra high padding (only zeros reach it) is output_padding.
    begins, ends, extra = [], [], []
    for k, d, (lo, hi) in zip(ksize, dilation, padding, strict=True):
        k_eff = (int(k) - 1) * d + 1
        begin, end = k_eff - 1 - int(lo), k_eff - 1 - int(hi)
        if begin < 0:
            return None
        begins.append(begin)
        ends.append(max(end, 0))
        extra.append(max(-end, 0))
    kernel = _transposed_kernel(ctx, ops, dtype, n, ctx.marked.params["transpose_kernel"])
    bias = ctx.cast(ops["bias"], dtype) if "bias" in ops else None
    y = ctx.op.ConvTranspose(to_nchw(ctx, ctx.cast(ops["x"], dtype), rank), kernel, bias,
                             strides=[int(s) for s in eqn.params["lhs_dilation"]], dilations=dilation,
                             pads=begins + ends, output_padding=extra if any(extra) else None)
    return to_nhwc(ctx, y, rank)



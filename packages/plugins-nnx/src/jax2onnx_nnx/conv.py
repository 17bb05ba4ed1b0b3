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

from typing import Any

import jax
import numpy as np
from flax import nnx
from jax2onnx.plugin import Lowerings, Patch, is_array
from jax2onnx.testing import Component, Testcase

from ._fusion import (
    Operands,
    call_module,
    const_array,
    find_eqns,
    one_output_like,
    region_body,
    static_ints,
    to_nchw,
    to_nhwc,
)
from .cases.helpers import fused_budget, model

lowerings = Lowerings()

CONV = "jax2onnx_nnx.conv"
CONV_TRANSPOSE = "jax2onnx_nnx.conv_transpose"
#: Element types onnxruntime implements Conv/ConvTranspose for.
_CONV_DTYPES = {np.dtype(np.float32), np.dtype(np.float16)}


def _as_tuple(v: Any, n: int) -> tuple[int, ...]:
    if v is None:
        return (1,) * n
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    return tuple(int(d) for d in v)


def _padding_mode(padding: Any) -> str | None:
    """'SAME'/'SAME_LOWER'/'VALID'/'EXPLICIT' when ONNX can express it; None for the rest."""
    if isinstance(padding, str):
        return padding if padding in ("SAME", "SAME_LOWER", "VALID") else None
    return "EXPLICIT"


def _plain(args: tuple, kwargs: dict) -> bool:
    return not args and all(v is None for v in kwargs.values())


# ---------------------------------------------------------------------------------------------
# Patches


def _patch_conv(original):
    def __call__(self, x, *args, **kwargs):
        n = len(self.kernel_size)
        mode = _padding_mode(self.padding)
        if (
            not _plain(args, kwargs)
            or not is_array(x)
            or x.ndim != n + 2  # flax folds/adds batch dims with reshapes around the conv
            or mode is None
            or getattr(self, "mask", None) is not None
            or any(d != 1 for d in _as_tuple(self.input_dilation, n))
            or getattr(self, "conv_general_dilated", jax.lax.conv_general_dilated) is not jax.lax.conv_general_dilated
        ):
            return original(self, x, *args, **kwargs)
        return call_module(CONV, self, lambda m, x: original(m, x), {"x": x}, padding_mode=mode)

    return __call__


def _patch_conv_transpose(original):
    def __call__(self, x, *args, **kwargs):
        n = len(self.kernel_size)
        mode = _padding_mode(self.padding)
        if not _plain(args, kwargs) or not is_array(x) or x.ndim != n + 2 or mode is None or self.mask is not None:
            return original(self, x, *args, **kwargs)
        return call_module(CONV_TRANSPOSE, self, lambda m, x: original(m, x), {"x": x}, padding_mode=mode,
                           transpose_kernel=bool(getattr(self, "transpose_kernel", False)))

    return __call__


patches = [
    Patch("flax.nnx.Conv", "__call__", _patch_conv),
    Patch("flax.nnx.ConvTranspose", "__call__", _patch_conv_transpose),
]


# ---------------------------------------------------------------------------------------------
# Lowerings


def _body_conv(ctx: Any) -> Any | None:
    """The region's one ``conv_general_dilated`` equation, when it is the forward call."""
    found = find_eqns(region_body(ctx), "conv_general_dilated")
    if len(found) != 1:
        return None
    eqn = found[0]
    if eqn.params.get("batch_group_count", 1) != 1 or not one_output_like(ctx, eqn.outvars[0].aval.shape):
        return None
    return eqn


def _auto_pad(mode: str) -> str | None:
    return {"SAME": "SAME_UPPER", "SAME_LOWER": "SAME_LOWER", "VALID": "VALID"}.get(mode)


@lowerings.register_call(CONV)
def lower_conv(ctx, *ins):
    dtype = np.dtype(ctx.avals_out[0].dtype)
    if dtype not in _CONV_DTYPES:
        return None
    eqn = _body_conv(ctx)
    if eqn is None or any(d != 1 for d in eqn.params["lhs_dilation"]):
        return None
    ops = Operands(ctx, ins)
    rank = len(ops.shape("x"))
    n = rank - 2
    attrs: dict[str, Any] = {}
    padding = [d for pair in eqn.params["padding"] for d in pair]
    if static_ints(padding):
        if any(int(d) < 0 for d in padding):  # a crop: not a Conv pad
            return None
        attrs["pads"] = [int(lo) for lo, _ in eqn.params["padding"]] + [int(hi) for _, hi in eqn.params["padding"]]
    else:  # symbolic spatial sizes: ONNX computes SAME padding itself, as lax does
        attrs["auto_pad"] = _auto_pad(ctx.marked.params["padding_mode"])
        if attrs["auto_pad"] is None:
            return None
    kernel = ctx.op.Transpose(ctx.cast(ops["kernel"], dtype), perm=[n + 1, n, *range(n)])  # HWIO → OIHW
    bias = ctx.cast(ops["bias"], dtype) if "bias" in ops else None
    y = ctx.op.Conv(
        to_nchw(ctx, ctx.cast(ops["x"], dtype), rank), kernel, bias,
        strides=[int(s) for s in eqn.params["window_strides"]],
        dilations=[int(d) for d in eqn.params["rhs_dilation"]],
        group=int(eqn.params["feature_group_count"]),
        **attrs,
    )
    return to_nhwc(ctx, y, rank)


def _transposed_kernel(ctx: Any, ops: Operands, dtype: Any, n: int, transpose_kernel: bool) -> Any:
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


@lowerings.register_call(CONV_TRANSPOSE)
def lower_conv_transpose(ctx, *ins):
    dtype = np.dtype(ctx.avals_out[0].dtype)
    if dtype not in _CONV_DTYPES:
        return None
    eqn = _body_conv(ctx)
    if eqn is None or any(s != 1 for s in eqn.params["window_strides"]):
        return None
    ops = Operands(ctx, ins)
    rank = len(ops.shape("x"))
    n = rank - 2
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
    y = ctx.op.ConvTranspose(
        to_nchw(ctx, ctx.cast(ops["x"], dtype), rank), kernel, bias,
        strides=[int(s) for s in eqn.params["lhs_dilation"]],
        dilations=dilation,
        pads=begins + ends,
        output_padding=extra if any(extra) else None,
    )
    return to_nhwc(ctx, y, rank)


# ---------------------------------------------------------------------------------------------
# Testcases

_rngs = lambda: nnx.Rngs(0)  # noqa: E731
_SIGNED = {"low": -1.0, "high": 1.0}


def _conv(cin, cout, ks, **kw):
    return model(lambda: nnx.Conv(cin, cout, kernel_size=ks, rngs=_rngs(), **kw), **_SIGNED)


def _conv_t(cin, cout, ks, **kw):
    return model(lambda: nnx.ConvTranspose(cin, cout, kernel_size=ks, rngs=_rngs(), **kw), **_SIGNED)


class _TwoConvs(nnx.Module):
    """conv → relu → conv → batchnorm: the layout Transposes between layers must cancel."""

    def __init__(self, rngs: nnx.Rngs):
        self.c1 = nnx.Conv(3, 4, kernel_size=(3, 3), rngs=rngs)
        self.c2 = nnx.Conv(4, 5, kernel_size=(3, 3), strides=(2, 2), rngs=rngs)
        self.bn = nnx.BatchNorm(5, use_running_average=True, rngs=rngs)

    def __call__(self, x):
        return self.bn(self.c2(nnx.relu(self.c1(x))))


#: float64 convolutions take the exact decomposition (no double Conv/ConvTranspose in onnxruntime).
_CONV = {"expected_ops": ["Conv"], "expected_ops_f64": ()}
_CONV_T = {"expected_ops": ["ConvTranspose"], "expected_ops_f64": ()}
_CONV_CHECK = {**_CONV, "check": fused_budget(max_transposes=2)}

components = [
    Component(
        name="nnx.conv",
        onnx=["Conv", "Transpose"],
        since="v0.1.0",
        testcases=[
            Testcase("conv_basic_bias", factory=_conv(3, 4, (3, 3)), input_shapes=[("B", 6, 6, 3)],
                     **_CONV, check=fused_budget(max_nodes=3)),
            Testcase("conv_basic_bias_2", factory=_conv(1, 4, (3, 3)), input_shapes=[(2, 5, 5, 1)],
                     **_CONV_CHECK),
            Testcase("conv_basic_bias_3", factory=_conv(2, 3, (3,)), input_shapes=[(2, 7, 2)], **_CONV_CHECK),
            Testcase("conv_stride2_bias", factory=_conv(3, 4, (3, 3), strides=(2, 2)), input_shapes=[(2, 7, 7, 3)],
                     **_CONV_CHECK),
            Testcase("conv_no_bias", factory=_conv(3, 4, (3, 3), use_bias=False), input_shapes=[("B", 5, 5, 3)],
                     **_CONV_CHECK),
            Testcase("conv_valid_padding", factory=_conv(3, 4, (3, 3), padding="VALID"), input_shapes=[(2, 6, 6, 3)],
                     **_CONV_CHECK),
            Testcase("conv_stride1", factory=_conv(3, 2, (3, 3), strides=1, padding=((1, 0), (2, 1))),
                     input_shapes=[(2, 5, 5, 3)], **_CONV_CHECK),
            Testcase("conv_stride2", factory=_conv(3, 2, (2, 2), strides=2, padding="SAME"),
                     input_shapes=[(2, 7, 6, 3)], **_CONV_CHECK),
            Testcase("conv_different_kernel", factory=_conv(2, 3, (1, 3), kernel_dilation=(1, 2)),
                     input_shapes=[(2, 5, 7, 2)], **_CONV_CHECK),
            Testcase("conv_float64", factory=_conv(2, 2, (2, 2)), input_shapes=[(1, 4, 4, 2)], **_CONV_CHECK),
            Testcase("conv_single_batch", factory=_conv(3, 4, (3, 3)), input_shapes=[(1, 5, 5, 3)],
                     **_CONV_CHECK),
            Testcase("conv_large_batch", factory=_conv(3, 4, (3, 3)), input_shapes=[(16, 5, 5, 3)],
                     **_CONV_CHECK),
            Testcase("conv_grouped", factory=_conv(4, 6, (3, 3), feature_group_count=2), input_shapes=[("B", 5, 5, 4)],
                     **_CONV_CHECK),
            Testcase("conv_3d", factory=_conv(2, 3, (2, 2, 2)), input_shapes=[("B", 3, 4, 3, 2)], **_CONV_CHECK),
            # Symbolic spatial sizes: SAME padding is left to ONNX (auto_pad) as it cannot be precomputed.
            # float64 declines to the lax pack, whose exact tap-slice conv needs static spatial sizes.
            Testcase("conv_symbolic_spatial", factory=_conv(2, 3, (3, 3), strides=2),
                     input_shapes=[("B", "H", "W", 2)], **_CONV_CHECK, run_f64=False),
            Testcase("conv_stack_transposes_cancel",
                     factory=model(lambda: _TwoConvs(_rngs())),
                     input_shapes=[("B", 8, 8, 3)], expected_ops=["Conv", "BatchNormalization"],
                     expected_ops_f64=["BatchNormalization"], check=fused_budget(max_transposes=2)),
        ],
    ),
    Component(
        name="nnx.conv_transpose",
        onnx=["ConvTranspose", "Transpose"],
        since="v0.7.0",
        testcases=[
            Testcase("conv_transpose_valid", factory=_conv_t(3, 4, (3, 3), padding="VALID"),
                     input_shapes=[("B", 4, 4, 3)], **_CONV_T, check=fused_budget(max_nodes=3)),
            Testcase("conv_transpose_same_stride2", factory=_conv_t(3, 2, (3, 3), strides=(2, 2), padding="SAME"),
                     input_shapes=[("B", 4, 5, 3)], **_CONV_T),
            Testcase("conv_transpose_same_k2_stride2", factory=_conv_t(2, 2, (2, 2), strides=2),
                     input_shapes=[("B", 3, 3, 2)], **_CONV_T),
            Testcase("conv_transpose_explicit_padding", factory=_conv_t(2, 3, (3,), strides=2, padding=((2, 1),)),
                     input_shapes=[("B", 5, 2)], **_CONV_T),
            Testcase("conv_transpose_dilated", factory=_conv_t(2, 3, (2, 2), kernel_dilation=(2, 1), use_bias=False),
                     input_shapes=[("B", 4, 4, 2)], **_CONV_T),
            Testcase("conv_transpose_transpose_kernel",
                     factory=_conv_t(3, 2, (3, 3), strides=2, padding="SAME", transpose_kernel=True),
                     input_shapes=[("B", 4, 4, 3)], **_CONV_T),
        ],
    ),
]

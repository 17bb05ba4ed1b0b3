"""Pooling regions and lowerings (``lax.reduce_window`` over (batch, *spatial, features))."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..dtypes import is_float
from ..plugin import Patch, is_array, marked_call
from .conv import channels_first
from .operands import static_ints

# ---------------------------------------------------------------------------------------------
# Pooling: ``lax.reduce_window`` over (batch, *spatial, features)


def max_pool_dtypes(ctx: Any) -> frozenset[np.dtype]:
    """The floats the target onnxruntime's MaxPool runs on (its int8/uint8 kernels are left out:
    :func:`max_pool`'s NaN handling is for floats, integer pools keep the lax path)."""
    return ctx.kernel_dtypes("MaxPool") & frozenset(np.dtype(t) for t in ("float16", "float32", "float64"))



def _static_padding(padding: Any) -> Any | None:
    """The padding as a hashable static value, or None when it is not one ONNX can express."""
    if isinstance(padding, str):
        return padding if padding in ("SAME", "VALID") else None
    try:
        pairs = tuple((int(lo), int(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        return None
    return pairs if all(lo >= 0 and hi >= 0 for lo, hi in pairs) else None


def pool_region(mark: str, original: Callable[..., Any], inputs: Any, window_shape: Any, strides: Any,
                padding: Any, *extra: Any, **static: Any) -> Any:
    """``original(inputs, window_shape, strides, padding, *extra)`` (a channels-last pooling
    function such as flax's ``max_pool``) as the region ``mark`` when its window, strides and
    padding are static and ONNX can express them; else the original call. ``static`` names the
    ``extra`` arguments for the lowering (``count_include_pad=True``)."""
    try:
        window = tuple(int(w) for w in window_shape)
        steps = tuple(int(s) for s in strides) if strides is not None else (1,) * len(window)
    except (TypeError, ValueError):
        return original(inputs, window_shape, strides, padding, *extra)
    pad = _static_padding(padding)
    if not is_array(inputs) or inputs.ndim != len(window) + 2 or pad is None or len(steps) != len(window):
        return original(inputs, window_shape, strides, padding, *extra)

    def body(x: Any, **_: Any) -> Any:
        return original(x, window, steps, pad, *extra)

    return marked_call(mark, body, inputs, window_shape=window, strides=steps, padding=pad, **static)


def pool_attrs(ctx: Any) -> dict[str, Any] | None:
    """kernel_shape/strides and pads (or auto_pad) for a :func:`pool_region`, None to decline."""
    p = ctx.marked.params
    shape = tuple(ctx.avals_in[0].shape)
    if len(ctx.avals_out) != 1 or len(ctx.avals_out[0].shape) != len(shape):
        return None
    window, strides, padding = p["window_shape"], p["strides"], p["padding"]
    attrs: dict[str, Any] = {"kernel_shape": list(window), "strides": list(strides)}
    spatial = shape[1:-1]
    if padding == "VALID":
        pairs: Any = [(0, 0)] * len(window)
    elif padding == "SAME" and not static_ints(spatial):
        attrs["auto_pad"] = "SAME_UPPER"  # JAX's SAME puts the odd element at the end
        return attrs
    elif padding == "SAME":
        attrs["pads"] = same_pads(spatial, window, strides)
        return attrs
    else:
        pairs = padding
    attrs["pads"] = [int(lo) for lo, _ in pairs] + [int(hi) for _, hi in pairs]
    return attrs


def same_pads(spatial: Sequence[Any], window: Sequence[int], strides: Sequence[int]) -> list[int]:
    """ONNX ``pads`` (all begins, then all ends) of JAX's ``"SAME"`` padding for static sizes."""
    import jax

    pairs = jax.lax.padtype_to_pads(tuple(int(d) for d in spatial), tuple(window), tuple(strides), "SAME")
    return [int(lo) for lo, _ in pairs] + [int(hi) for _, hi in pairs]


def pool_patches(module: str, avg_mark: str, max_mark: str) -> list[Any]:
    """Patches of ``<module>.avg_pool`` and ``<module>.max_pool``, functions with flax's signature
    ``(inputs, window_shape, strides=None, padding="VALID"[, count_include_pad=True])`` over
    channels-last inputs, making each call the region ``avg_mark``/``max_mark`` (see
    :func:`pool_region`; lowered by :func:`lower_avg_pool_channels_last` and
    :func:`lower_max_pool_channels_last`)."""

    def patch_avg_pool(original: Callable[..., Any]) -> Callable[..., Any]:
        def avg_pool(inputs: Any, window_shape: Any, strides: Any = None, padding: Any = "VALID",
                     count_include_pad: Any = True) -> Any:
            if not isinstance(count_include_pad, (bool, np.bool_)):
                return original(inputs, window_shape, strides, padding, count_include_pad)
            include = bool(count_include_pad)
            return pool_region(avg_mark, original, inputs, window_shape, strides, padding, include,
                               count_include_pad=include)

        return avg_pool

    def patch_max_pool(original: Callable[..., Any]) -> Callable[..., Any]:
        def max_pool(inputs: Any, window_shape: Any, strides: Any = None, padding: Any = "VALID") -> Any:
            return pool_region(max_mark, original, inputs, window_shape, strides, padding)

        return max_pool

    return [Patch(module, "avg_pool", patch_avg_pool), Patch(module, "max_pool", patch_max_pool)]


def lower_avg_pool_channels_last(ctx: Any, x: ir.Value) -> ir.Value | None:
    """A channels-last average-pool region (param ``count_include_pad``) → AveragePool."""
    attrs = pool_attrs(ctx) if np.dtype(ctx.avals_out[0].dtype) in ctx.kernel_dtypes("AveragePool") else None
    if attrs is None:
        return None
    include = int(ctx.marked.params["count_include_pad"])
    return channels_first(ctx, x, len(ctx.avals_in[0].shape), True,
                           lambda v: ctx.op.AveragePool(v, count_include_pad=include, **attrs))


#: The ops a float max pool exports as (:func:`max_pool`): what pack testcases expect.
MAX_POOL_OPS = ("MaxPool", "ReduceSum", "IsNaN", "If")


def max_pool(ctx: Any, x: ir.Value, dtype: Any, **attrs: Any) -> ir.Value:
    """``MaxPool(x, **attrs)`` in which a window holding a NaN is NaN, as XLA's max is
    (onnxruntime's MaxPool skips NaN: a window [nan, -inf] gives -inf). Every fused or lax max
    pool goes through here; ``dtype`` is ``x``'s (integers have no NaN: the bare MaxPool).

    A NaN in the input makes ``ReduceSum(x)`` NaN, so ``IsNaN(ReduceSum(x))`` picks, in an ``If``,
    the exact form (the NaN mask pooled with the same attributes, then ``Where``) or the plain
    pool's result. The sum is also NaN when +inf and -inf both occur (or its partial sums overflow
    both ways); such inputs take the exact form too, so the result never depends on it.

    Measured in onnxruntime 1.32 on one core, NCHW (8, 64, 56, 56) float32 (the layout inside a
    conv net, where the pool's Transposes cancel), median of 30 runs:

    =================  ==========  ======================  =============================
    pool               plain       mask + Where (always)   ReduceSum check + If (this)
    =================  ==========  ======================  =============================
    2×2 stride 2       0.35 ms     1.96 ms                 0.51 ms (2.05 ms with a NaN)
    3×3 stride 2 SAME  0.40 ms     2.37 ms                 0.54 ms (2.44 ms with a NaN)
    =================  ==========  ======================  =============================

    (an ``IsNaN`` → ``ReduceMax`` check instead of the sum: 1.15 / 1.33 ms, an elementwise pass
    more). NaN-free inputs, the normal case, pay one reduction over the input. A lone NHWC pool
    whose Transposes meet no Conv costs more: onnxruntime folds Transpose → MaxPool → Transpose
    into its NHWC kernel (0.4 ms) but not across the ``If``, 1.7 ms (mask + Where: 2.4 ms).
    """
    y = ctx.op.MaxPool(x, **attrs)
    if not is_float(dtype):
        return y
    exact = ctx.subgraph("max_pool_nan")
    mask = exact.op.MaxPool(exact.cast(exact.op.IsNaN(x), dtype), **attrs)
    picked = exact.op.Where(exact.op.Greater(mask, exact.const(0, dtype)), exact.const(np.nan, dtype), y)
    plain = ctx.subgraph("max_pool")
    any_nan = ctx.op.IsNaN(ctx.op.ReduceSum(x, keepdims=0))
    return ctx.op.If(any_nan, then_branch=exact.finish([picked]), else_branch=plain.finish([y]))


def lower_max_pool_channels_last(ctx: Any, x: ir.Value) -> ir.Value | None:
    """A channels-last max-pool region → MaxPool (NaN-propagating: :func:`max_pool`)."""
    dtype = np.dtype(ctx.avals_out[0].dtype)
    attrs = pool_attrs(ctx) if dtype in max_pool_dtypes(ctx) else None
    if attrs is None:
        return None
    return channels_first(ctx, x, len(ctx.avals_in[0].shape), True, lambda v: max_pool(ctx, v, dtype, **attrs))



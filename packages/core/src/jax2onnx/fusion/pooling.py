"""Pooling regions and lowerings (``lax.reduce_window`` over (batch, *spatial, features))."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..dtypes import is_float
from .conv import channels_first
from .nan_free import NAN_GUARD_KEY, is_nan_free
from .operands import static_ints

# ---------------------------------------------------------------------------------------------
# Pooling: ``lax.reduce_window`` over (batch, *spatial, features)


def max_pool_dtypes(ctx: Any) -> frozenset[np.dtype]:
    """The floats the target onnxruntime's MaxPool runs on (its int8/uint8 kernels are left out:
    :func:`max_pool`'s NaN handling is for floats, integer pools keep the lax path)."""
    return ctx.kernel_dtypes("MaxPool") & frozenset(np.dtype(t) for t in ("float16", "float32", "float64"))



def _padding_of(pairs: Sequence[Any], spatial: Sequence[Any], window: tuple[int, ...], steps: tuple[int, ...]) -> Any:
    """The padding a pool was called with, as ONNX can take it: ``"VALID"``, ``"SAME"`` (what JAX
    turns it into, symbolic sizes included) or static (low, high) pairs; None otherwise."""
    import jax

    if all(str(lo) == "0" and str(hi) == "0" for lo, hi in pairs):
        return "VALID"
    try:
        same = jax.lax.padtype_to_pads(tuple(spatial), window, steps, "SAME")
    except Exception:  # noqa: BLE001 - a size JAX cannot pad symbolically: not the SAME form
        same = None
    if same is not None and [(str(lo), str(hi)) for lo, hi in same] == [(str(lo), str(hi)) for lo, hi in pairs]:
        return "SAME"
    try:
        static = tuple((int(lo), int(hi)) for lo, hi in pairs)
    except (TypeError, ValueError):
        return None
    return static if all(lo >= 0 and hi >= 0 for lo, hi in static) else None


def _recognize_pool(reduction: str, average: bool) -> Callable[[Any], Any]:
    """The recognizer of a flax-style pool's call (:func:`pool_lowerings`): window, strides and
    padding from its ``reduce_window_*`` equation over (batch, *spatial, features); an average pool
    that divides by a second window sum (over ones) excludes the padding from the count."""

    def recognize(site: Any) -> dict[str, Any] | None:
        windows = site.eqns(reduction)
        if len(site.operands) != 1 or not windows or len(windows) > (2 if average else 1):
            return None
        p = windows[0].params
        shape = tuple(site.avals_in[0].shape)
        dims, steps_all = tuple(p["window_dimensions"]), tuple(p["window_strides"])
        if len(dims) != len(shape) or len(shape) < 3 or dims[0] != 1 or dims[-1] != 1 or steps_all[0] != 1 or steps_all[-1] != 1:
            return None  # one batch axis in front, features last, as the ONNX pools after a transpose
        if any(d != 1 for d in (*p.get("base_dilation", ()), *p.get("window_dilation", ()))):
            return None
        window, steps = tuple(int(d) for d in dims[1:-1]), tuple(int(s) for s in steps_all[1:-1])
        padding = _padding_of(tuple(p["padding"])[1:-1], shape[1:-1], window, steps)
        if padding is None:
            return None
        params: dict[str, Any] = {"window_shape": window, "strides": steps, "padding": padding}
        if average:
            params["count_include_pad"] = len(windows) == 1
        return params

    return recognize


def _call_avg_pool(original: Callable[..., Any], arrays: Sequence[Any], p: dict[str, Any]) -> Any:
    return original(arrays[0], p["window_shape"], p["strides"], p["padding"], p["count_include_pad"])


def _call_max_pool(original: Callable[..., Any], arrays: Sequence[Any], p: dict[str, Any]) -> Any:
    return original(arrays[0], p["window_shape"], p["strides"], p["padding"])


def pool_lowerings(lowerings: Any, module: str) -> None:
    """Register the AveragePool/MaxPool lowerings of ``<module>.avg_pool`` and ``<module>.max_pool``,
    functions with flax's signature ``(inputs, window_shape, strides=None, padding="VALID"[,
    count_include_pad=True])`` over channels-last inputs. They are plain Python functions, so a
    call is found by the equations it emits (their traceback passes through the function,
    :meth:`jax2onnx.plugin.Lowerings.register_library`); nothing of the library is replaced.
    ``flax.nnx`` re-exports ``flax.linen``'s pools: registering both names is one key."""
    lowerings.register_library(f"{module}.avg_pool", recognize=_recognize_pool("reduce_window_sum", True),
                               call=_call_avg_pool)(lower_avg_pool_channels_last)
    lowerings.register_library(f"{module}.max_pool", recognize=_recognize_pool("reduce_window_max", False),
                               call=_call_max_pool)(lower_max_pool_channels_last)


def pool_attrs(ctx: Any) -> dict[str, Any] | None:
    """kernel_shape/strides and pads (or auto_pad) for a recognized pool, None to decline."""
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


def lower_avg_pool_channels_last(ctx: Any, x: ir.Value) -> ir.Value | None:
    """A channels-last average pool (params ``window_shape``, ``strides``, ``padding``,
    ``count_include_pad``) → AveragePool."""
    attrs = pool_attrs(ctx) if np.dtype(ctx.avals_out[0].dtype) in ctx.kernel_dtypes("AveragePool") else None
    if attrs is None:
        return None
    include = int(ctx.marked.params["count_include_pad"])
    return channels_first(ctx, x, len(ctx.avals_in[0].shape), True,
                           lambda v: ctx.op.AveragePool(v, count_include_pad=include, **attrs))


#: The ops a float max pool whose input may hold NaN exports as (:func:`max_pool`): what pack
#: testcases expect.
MAX_POOL_OPS = ("MaxPool", "ReduceSum", "IsNaN", "If")


def nan_guard_wanted(ctx: Any, x: ir.Value, dtype: Any) -> bool:
    """Whether :func:`max_pool` guards ``x`` against NaN: a float ``x`` that may hold one
    (:func:`jax2onnx.fusion.nan_free.is_nan_free`), unless the export turned the guard off
    (``to_onnx(..., max_pool_nan_guard=False)``)."""
    if not is_float(dtype) or not getattr(ctx.options, "max_pool_nan_guard", True):
        return False
    return not is_nan_free(x)


def max_pool(ctx: Any, x: ir.Value, dtype: Any, **attrs: Any) -> ir.Value:
    """``MaxPool(x, **attrs)`` in which a window holding a NaN is NaN, as XLA's max is. Every fused
    or lax max pool goes through here; ``dtype`` is ``x``'s.

    onnxruntime's MaxPool (MLAS, x86) does not propagate NaN: which window keeps it depends on
    where the NaN sits and on the kernel (2×2 windows [1, nan, 1, 1] give NaN, [nan, 1, 1, 1] and
    [1, 1, nan, 1] give 1; a 3×3 window of NaN and -inf gives -3.4e38). Its ReduceMax drops NaN
    too, so no other single op pools exactly. The bare MaxPool is exported where no NaN can reach
    it (an integer ``x``, or one :func:`~jax2onnx.fusion.nan_free.is_nan_free` proves NaN-free) or
    where the export asked for it (``max_pool_nan_guard=False``); otherwise:

    A NaN in the input makes ``ReduceSum(x)`` NaN, so ``IsNaN(ReduceSum(x))`` picks, in an ``If``,
    the exact form (the NaN mask pooled with the same attributes, then ``Where``) or the plain
    pool's result. The sum is also NaN when +inf and -inf both occur (or its partial sums overflow
    both ways); such inputs take the exact form too, so the result never depends on it. The check
    reads the whole input once: ``bench/max_pool_nan_guard.py`` measures what it costs next to
    the pool (docs/guide/troubleshooting.md, "Max pooling and NaN"). Where the pool's layout
    Transposes do not cancel, :mod:`jax2onnx.passes.max_pool_guard` moves the guard past them; in
    a net whose pools' inputs a bound reaches from the model's float inputs,
    :mod:`jax2onnx.passes.nan_guard_hoist` turns the guards into one check of those inputs. The
    other exact forms cost
    more (onnxruntime 1.32, one core, NCHW (8, 64, 56, 56), 2×2 stride 2, medians of 30: the plain
    pool 0.35 ms, this form 0.51 ms, the exact form on every run 1.96 ms, an ``IsNaN`` →
    ``ReduceMax`` check instead of the sum 1.15 ms).
    """
    y = ctx.op.MaxPool(x, **attrs)
    if not nan_guard_wanted(ctx, x, dtype):
        return y
    exact = ctx.subgraph("max_pool_nan")
    mask = exact.op.MaxPool(exact.cast(exact.op.IsNaN(x), dtype), **attrs)
    picked = exact.op.Where(exact.op.Greater(mask, exact.const(0, dtype)), exact.const(np.nan, dtype), y)
    plain = ctx.subgraph("max_pool")
    any_nan = ctx.op.IsNaN(ctx.op.ReduceSum(x, keepdims=0))
    guarded = ctx.op.If(any_nan, then_branch=exact.finish([picked]), else_branch=plain.finish([y]))
    guarded.producer().metadata_props[NAN_GUARD_KEY] = "max_pool"  # what the hoist looks for
    return guarded


def lower_max_pool_channels_last(ctx: Any, x: ir.Value) -> ir.Value | None:
    """A channels-last max pool (params as for :func:`lower_avg_pool_channels_last`) → MaxPool
    (NaN-propagating: :func:`max_pool`)."""
    dtype = np.dtype(ctx.avals_out[0].dtype)
    attrs = pool_attrs(ctx) if dtype in max_pool_dtypes(ctx) else None
    if attrs is None:
        return None
    return channels_first(ctx, x, len(ctx.avals_in[0].shape), True, lambda v: max_pool(ctx, v, dtype, **attrs))



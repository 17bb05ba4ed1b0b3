"""eqx.nn.MaxPool1d/2d/3d, eqx.nn.AvgPool1d/2d/3d → MaxPool / AveragePool.

Equinox pools one example ``(channels, *spatial)`` (moving the channels last and back around a
``lax.reduce_window``); ONNX pools ``(N, C, *spatial)``, so one example gains the batch axis with an
``Unsqueeze``/``Squeeze`` pair and ``jax.vmap(pool)(x)`` is the bare op (``batching.py``). Equinox's
average divides by the window size, padding included: ``count_include_pad=1``. ``use_ceil``, and
float64 average pooling (no double AveragePool kernel in onnxruntime), are left to equinox's code.
A window holding a NaN is NaN, as in JAX (``jax2onnx.fusion.max_pool``: onnxruntime's MaxPool skips NaN).
"""

from __future__ import annotations

from functools import partial

import numpy as np
from jax2onnx.fusion import is_array, max_pool, max_pool_dtypes, one_output_like
from jax2onnx.plugin import Lowerings, ModulePatch

from ._fusion import call_module, from_onnx_batch, onnx_batch
from .batching import patch_call

lowerings = Lowerings()

MAX_POOL = "jax2onnx_eqx.max_pool"
AVG_POOL = "jax2onnx_eqx.avg_pool"
MAX_CLASSES = ("MaxPool1d", "MaxPool2d", "MaxPool3d")
AVG_CLASSES = ("AvgPool1d", "AvgPool2d", "AvgPool3d")


def fuse(mark: str, module, x, *, body, batch: int):
    """The region for ``module(x)`` (``batch`` = 0) or ``jax.vmap(module)(x)`` (``batch`` = 1);
    None when equinox's own code must run."""
    try:
        pads = tuple((int(lo), int(hi)) for lo, hi in module.padding)
        window = tuple(int(k) for k in module.kernel_size)
        strides = tuple(int(s) for s in module.stride)
    except (TypeError, ValueError):
        return None
    if (module.use_ceil or not is_array(x) or x.ndim != len(window) + 1 + batch
            or any(lo < 0 or hi < 0 for lo, hi in pads)):
        return None
    return call_module(mark, module, body, {"x": x}, batch=batch, window=window, strides=strides, pads=pads)


patches = [ModulePatch(f"equinox.nn.{name}", "__call__", patch_call(partial(fuse, MAX_POOL))) for name in MAX_CLASSES] + [
    ModulePatch(f"equinox.nn.{name}", "__call__", patch_call(partial(fuse, AVG_POOL))) for name in AVG_CLASSES]


def _lower(op: str, mark: str, **attrs):
    def lower(ctx, *ins):
        native = max_pool_dtypes(ctx) if mark == MAX_POOL else ctx.kernel_dtypes("AveragePool")
        if np.dtype(ctx.avals_out[0].dtype) not in native or not one_output_like(ctx, ctx.avals_out[0].shape):
            return None
        p = ctx.marked.params
        x = onnx_batch(ctx, ins[0], ctx.avals_in[0].shape, p["batch"])
        if x is None:
            return None
        pool = partial(max_pool, ctx, dtype=ctx.avals_out[0].dtype) if op == "MaxPool" else getattr(ctx.op, op)
        y = pool(x, kernel_shape=list(p["window"]), strides=list(p["strides"]),
                 pads=[lo for lo, _ in p["pads"]] + [hi for _, hi in p["pads"]], **attrs)
        return from_onnx_batch(ctx, y, p["batch"])

    return lower


lowerings.add(f"call:{MAX_POOL}", _lower("MaxPool", MAX_POOL))
lowerings.add(f"call:{AVG_POOL}", _lower("AveragePool", AVG_POOL, count_include_pad=1))

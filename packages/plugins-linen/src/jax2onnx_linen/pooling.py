"""nn.avg_pool, nn.max_pool → AveragePool / MaxPool, channels-last at the edges.

flax's pools are ``lax.reduce_window`` over (batch, spatial..., features); ``avg_pool`` divides by
the window size (``count_include_pad``) or by the number of real elements, which is exactly
AveragePool's ``count_include_pad`` attribute. Padding becomes explicit pads for static spatial
sizes (JAX's SAME puts the odd element at the end, as ONNX's SAME_UPPER does, used when the spatial
sizes are symbolic). Inputs without a batch axis or with several, and float64 average pooling (no
double AveragePool kernel in onnxruntime), are left to flax's code and the lax pack.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from flax import linen as nn
from jax2onnx.plugin import Lowerings, Patch, marked_call
from jax2onnx.testing import Component, Testcase

from ._fusion import is_array, static_ints, to_nchw, to_nhwc
from ._testing import float32_ops

lowerings = Lowerings()

AVG_POOL = "jax2onnx_linen.avg_pool"
MAX_POOL = "jax2onnx_linen.max_pool"
_AVG_DTYPES = {np.dtype(np.float32), np.dtype(np.float16)}
_MAX_DTYPES = {np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)}


def _pool_params(inputs: Any, window_shape: Any, strides: Any, padding: Any) -> dict[str, Any] | None:
    """Static window/strides/padding ONNX can express, else None (flax's own code runs)."""
    try:
        window = tuple(int(w) for w in window_shape)
        steps = tuple(int(s) for s in strides) if strides is not None else (1,) * len(window)
        if isinstance(padding, str):
            pad: Any = padding if padding in ("SAME", "VALID") else None
        else:
            pad = tuple((int(lo), int(hi)) for lo, hi in padding)
            pad = pad if all(lo >= 0 and hi >= 0 for lo, hi in pad) else None
    except (TypeError, ValueError):
        return None
    if pad is None or not is_array(inputs) or inputs.ndim != len(window) + 2 or len(steps) != len(window):
        return None
    return {"window_shape": window, "strides": steps, "padding": pad}


def _patch_avg_pool(original):
    def avg_pool(inputs, window_shape, strides=None, padding="VALID", count_include_pad=True):
        params = _pool_params(inputs, window_shape, strides, padding)
        if params is None or not isinstance(count_include_pad, (bool, np.bool_)):
            return original(inputs, window_shape, strides, padding, count_include_pad)

        def body(x, *, window_shape, strides, padding, count_include_pad):
            return original(x, window_shape, strides, padding, count_include_pad)

        return marked_call(AVG_POOL, body, inputs, count_include_pad=bool(count_include_pad), **params)

    return avg_pool


def _patch_max_pool(original):
    def max_pool(inputs, window_shape, strides=None, padding="VALID"):
        params = _pool_params(inputs, window_shape, strides, padding)
        if params is None:
            return original(inputs, window_shape, strides, padding)

        def body(x, *, window_shape, strides, padding):
            return original(x, window_shape, strides, padding)

        return marked_call(MAX_POOL, body, inputs, **params)

    return max_pool


patches = [
    Patch("flax.linen", "avg_pool", _patch_avg_pool),
    Patch("flax.linen", "max_pool", _patch_max_pool),
]


def _pool_attrs(ctx: Any) -> dict[str, Any] | None:
    """kernel_shape/strides and pads (or auto_pad) for the region, None to decline."""
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
        attrs["auto_pad"] = "SAME_UPPER"
        return attrs
    elif padding == "SAME":
        pairs = jax.lax.padtype_to_pads(tuple(int(d) for d in spatial), window, strides, "SAME")
    else:
        pairs = padding
    attrs["pads"] = [int(lo) for lo, _ in pairs] + [int(hi) for _, hi in pairs]
    return attrs


@lowerings.register_call(AVG_POOL)
def lower_avg_pool(ctx, x):
    attrs = _pool_attrs(ctx) if np.dtype(ctx.avals_out[0].dtype) in _AVG_DTYPES else None
    if attrs is None:
        return None
    rank = len(ctx.avals_in[0].shape)
    y = ctx.op.AveragePool(to_nchw(ctx, x, rank), count_include_pad=int(ctx.marked.params["count_include_pad"]),
                           **attrs)
    return to_nhwc(ctx, y, rank)


@lowerings.register_call(MAX_POOL)
def lower_max_pool(ctx, x):
    attrs = _pool_attrs(ctx) if np.dtype(ctx.avals_out[0].dtype) in _MAX_DTYPES else None
    if attrs is None:
        return None
    rank = len(ctx.avals_in[0].shape)
    return to_nhwc(ctx, ctx.op.MaxPool(to_nchw(ctx, x, rank), **attrs), rank)


# ---------------------------------------------------------------------------------------------
# Testcases

_AVG = float32_ops("AveragePool", max_nodes=3)

components = [
    Component(
        name="linen.avg_pool",
        onnx=["AveragePool", "Transpose"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_avg_pool", lambda x: nn.avg_pool(x, (2, 2), (2, 2)), [("B", 6, 6, 3)], check=_AVG),
            # Padded positions do not count: the divisor is the number of real elements.
            Testcase("linen_avg_pool_same_exclude_pad",
                     lambda x: nn.avg_pool(x, (3, 3), (2, 2), "SAME", count_include_pad=False), [("B", 5, 6, 2)],
                     check=_AVG),
            Testcase("linen_avg_pool_1d_explicit_padding", lambda x: nn.avg_pool(x, (3,), (2,), ((1, 2),)),
                     [("B", 6, 2)], check=_AVG),
        ],
    ),
    Component(
        name="linen.max_pool",
        onnx=["MaxPool", "Transpose"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_max_pool", lambda x: nn.max_pool(x, (2, 2), (2, 2)), [("B", 6, 6, 3)],
                     expected_ops=["MaxPool"], max_nodes=3),
            Testcase("linen_max_pool_same", lambda x: nn.max_pool(x, (3, 3), (2, 2), "SAME"), [("B", 5, 5, 3)],
                     expected_ops=["MaxPool"], max_nodes=3),
            Testcase("linen_max_pool_symbolic_spatial", lambda x: nn.max_pool(x, (2, 2), (2, 2), "SAME"),
                     [("B", "H", "W", 3)], expected_ops=["MaxPool"], max_nodes=3),
        ],
    ),
]

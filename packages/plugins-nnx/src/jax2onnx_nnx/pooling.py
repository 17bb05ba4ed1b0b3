"""nnx.avg_pool, nnx.max_pool → AveragePool / MaxPool, channels-last at the edges.

flax's pools (``flax.linen.pooling``, re-exported by ``flax.nnx``) are ``lax.reduce_window`` over
(batch, spatial..., features); ``avg_pool`` divides by the window size (``count_include_pad``) or
by the number of real elements, which is exactly AveragePool's ``count_include_pad`` attribute.
Padding is explicit pads for static spatial sizes (JAX's SAME puts the odd element at the end, as
ONNX's SAME_UPPER does, used when the spatial sizes are symbolic). Inputs without a batch axis or
with several, and float64 average pooling (no double AveragePool in onnxruntime), are left to
flax's code and the lax pack.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np
from flax import nnx
from jax2onnx.plugin import Lowerings, Patch, is_array, marked_call
from jax2onnx.testing import Component, Testcase

from ._fusion import static_ints, to_nchw, to_nhwc
from .cases.helpers import fused_budget

lowerings = Lowerings()

AVG_POOL = "jax2onnx_nnx.avg_pool"
MAX_POOL = "jax2onnx_nnx.max_pool"
_AVG_DTYPES = {np.dtype(np.float32), np.dtype(np.float16)}
_MAX_DTYPES = {np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.float64)}


def _static_padding(padding: Any) -> Any | None:
    """The padding as a hashable static value, or None when it is not one ONNX can express."""
    if isinstance(padding, str):
        return padding if padding in ("SAME", "VALID") else None
    try:
        pairs = tuple((int(lo), int(hi)) for lo, hi in padding)
    except (TypeError, ValueError):
        return None
    return pairs if all(lo >= 0 and hi >= 0 for lo, hi in pairs) else None


def _pool_params(inputs: Any, window_shape: Any, strides: Any, padding: Any) -> dict[str, Any] | None:
    try:
        window = tuple(int(w) for w in window_shape)
        steps = tuple(int(s) for s in strides) if strides is not None else (1,) * len(window)
    except (TypeError, ValueError):
        return None
    pad = _static_padding(padding)
    if not is_array(inputs) or inputs.ndim != len(window) + 2 or pad is None or len(steps) != len(window):
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
    Patch("flax.nnx", "avg_pool", _patch_avg_pool),
    Patch("flax.nnx", "max_pool", _patch_max_pool),
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
        pairs = [(0, 0)] * len(window)
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
    if np.dtype(ctx.avals_out[0].dtype) not in _AVG_DTYPES:
        return None
    attrs = _pool_attrs(ctx)
    if attrs is None:
        return None
    rank = len(ctx.avals_in[0].shape)
    y = ctx.op.AveragePool(to_nchw(ctx, x, rank), count_include_pad=int(ctx.marked.params["count_include_pad"]),
                           **attrs)
    return to_nhwc(ctx, y, rank)


@lowerings.register_call(MAX_POOL)
def lower_max_pool(ctx, x):
    if np.dtype(ctx.avals_out[0].dtype) not in _MAX_DTYPES:
        return None
    attrs = _pool_attrs(ctx)
    if attrs is None:
        return None
    rank = len(ctx.avals_in[0].shape)
    return to_nhwc(ctx, ctx.op.MaxPool(to_nchw(ctx, x, rank), **attrs), rank)


# ---------------------------------------------------------------------------------------------
# Testcases


def _avg(window, strides=None, padding="VALID", **kw):
    return lambda x: nnx.avg_pool(x, window_shape=window, strides=strides, padding=padding, **kw)


#: float64 average pools take the exact decomposition (no double AveragePool in onnxruntime).
_AVG = {"expected_ops": ["AveragePool"], "expected_ops_f64": (), "check": fused_budget(max_nodes=3)}

components = [
    Component(
        name="nnx.avg_pool",
        onnx=["AveragePool", "Transpose"],
        since="v0.1.0",
        testcases=[
            Testcase("avg_pool", _avg((2, 2), (2, 2)), [("B", 6, 6, 3)], **_AVG),
            Testcase("avg_pool_same_padding", _avg((2, 2), (2, 2), "SAME"), [("B", 5, 5, 3)], **_AVG),
            Testcase("avg_pool_default_padding", lambda x: nnx.avg_pool(x, (2, 2), (2, 2)), [("B", 6, 6, 3)],
                     **_AVG),
            Testcase("avg_pool_stride1", _avg((2, 2), (1, 1)), [("B", 5, 5, 2)], **_AVG),
            Testcase("avg_pool_win3x3_stride2", _avg((3, 3), (2, 2)), [("B", 7, 7, 2)], **_AVG),
            Testcase("avg_pool_stride_none", _avg((2, 2)), [("B", 4, 4, 2)], **_AVG),
            # Padded positions do not count: the divisor is the number of real elements.
            Testcase("avg_pool_count_include_pad_false", _avg((3, 3), (2, 2), "SAME", count_include_pad=False),
                     [("B", 5, 6, 2)], **_AVG),
            Testcase("avg_pool_explicit_padding_include_pad", _avg((3,), (2,), ((1, 2),)), [("B", 6, 2)],
                     **_AVG),
            # float64 declines to the lax pack, which needs static spatial sizes for its exact sums.
            Testcase("avg_pool_symbolic_spatial", _avg((2, 2), (2, 2), "SAME"), [("B", "H", "W", 2)],
                     **_AVG, run_f64=False),
        ],
    ),
    Component(
        name="nnx.max_pool",
        onnx=["MaxPool", "Transpose"],
        since="v0.1.0",
        testcases=[
            Testcase("max_pool", lambda x: nnx.max_pool(x, (2, 2), (2, 2)), [("B", 6, 6, 3)],
                     expected_ops=["MaxPool"], max_nodes=3),
            Testcase("max_pool_same_padding", lambda x: nnx.max_pool(x, (3, 3), (2, 2), "SAME"), [("B", 5, 5, 3)],
                     expected_ops=["MaxPool"], max_nodes=3),
            Testcase("max_pool_1d_explicit_padding", lambda x: nnx.max_pool(x, (3,), (1,), ((1, 1),)), [("B", 6, 2)],
                     expected_ops=["MaxPool"], max_nodes=3),
            Testcase("max_pool_symbolic_spatial", lambda x: nnx.max_pool(x, (2, 2), (2, 2), "SAME"),
                     [("B", "H", "W", 3)], expected_ops=["MaxPool"], max_nodes=3),
        ],
    ),
]

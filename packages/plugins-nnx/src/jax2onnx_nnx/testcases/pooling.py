"""Testcases of :mod:`jax2onnx_nnx.pooling` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax2onnx.fusion import MAX_POOL_OPS
from jax2onnx.testing import Component, Testcase, channels_last_with_nan

from .helpers import fused_budget


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
                     expected_ops=MAX_POOL_OPS, max_nodes=6),
            Testcase("max_pool_same_padding", lambda x: nnx.max_pool(x, (3, 3), (2, 2), "SAME"), [("B", 5, 5, 3)],
                     expected_ops=MAX_POOL_OPS, max_nodes=6),
            Testcase("max_pool_1d_explicit_padding", lambda x: nnx.max_pool(x, (3,), (1,), ((1, 1),)), [("B", 6, 2)],
                     expected_ops=MAX_POOL_OPS, max_nodes=6),
            Testcase("max_pool_symbolic_spatial", lambda x: nnx.max_pool(x, (2, 2), (2, 2), "SAME"),
                     [("B", "H", "W", 3)], expected_ops=MAX_POOL_OPS, max_nodes=6),
            Testcase("max_pool_nan", lambda x: nnx.max_pool(x, (2, 2), (2, 2)), input_values=[channels_last_with_nan((2, 4, 4, 2))],
                     expected_ops=MAX_POOL_OPS, max_nodes=6),
            Testcase("max_pool_same_padding_nan", lambda x: nnx.max_pool(x, (3, 3), (2, 2), "SAME"),
                     input_values=[channels_last_with_nan((2, 5, 5, 2))], expected_ops=MAX_POOL_OPS, max_nodes=6),
            # float16: onnxruntime has MaxPool, ReduceSum and IsNaN for it
            Testcase("max_pool_nan_float16", lambda x: nnx.max_pool(x, (2, 2), (2, 2)),
                     input_values=[channels_last_with_nan((2, 4, 4, 2)).astype(np.float16)], expected_ops=MAX_POOL_OPS, max_nodes=6),
            # an integer input cast to float holds no NaN: the bare MaxPool (Cast, Transpose, MaxPool,
            # Transpose); JAX's default float (float64 in the double-precision variant)
            Testcase("max_pool_of_integer_pixels", lambda x: nnx.max_pool(x.astype(jnp.result_type(float)), (2, 2), (2, 2)),
                     input_values=[np.arange(2 * 6 * 6 * 3, dtype=np.int32).reshape(2, 6, 6, 3) % 251],
                     expected_ops=["MaxPool"], forbidden_ops=["If", "ReduceSum"], max_nodes=4),
        ],
    ),
]

"""Testcases of :mod:`jax2onnx_lax.windows` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ._testdata import spec


def _window(reducer, init, window, strides, padding, base=None, wdil=None):
    # A Python scalar init lets JAX recognise add/max/min with their identity and emit
    # reduce_window_{sum,max,min}; anything else stays the generic reduce_window.
    def fn(x):
        return lax.reduce_window(x, init, reducer, window, strides, padding, base, wdil)

    return fn


def avg_pool_nhwc(x):
    # What nnx.avg_pool computes: a window sum divided by the window size.
    return lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "SAME") / 4.0


def _expect_pool(f32_op: str, f64_op: str):
    """float32 graphs use the pooling op; float64 ones what onnxruntime can run in float64."""

    def check(model, variant):
        from jax2onnx.testing.runner import op_types, unavailable_ops

        want = f64_op if variant.double else f32_op
        if unavailable_ops(model, [want]):  # e.g. a dilated AveragePool before opset 19: a Conv
            return
        assert want in op_types(model), f"expected {want} in {sorted(op_types(model))}"

    return check


components = [
    Component(
        name="lax.reduce_window_sum",
        onnx=["AveragePool", "Mul", "Slice", "Sum"],
        since="v0.1.0",
        testcases=[
            Testcase("reduce_window_sum_nhwc", _window(lax.add, 0.0, (1, 2, 2, 1), (1, 2, 2, 1), "VALID"),
                     [("B", 4, 5, 3)], check=_expect_pool("AveragePool", "Sum")),
            Testcase("reduce_window_sum_avg_pool_same", avg_pool_nhwc, [("B", 5, 5, 2)]),
            Testcase("reduce_window_sum_dilated_padded", _window(lax.add, 0.0, (1, 1, 3, 2), (1, 1, 1, 2),
                                                               ((0, 0), (0, 0), (2, 1), (1, 0)), wdil=(1, 1, 2, 1)),
                     [("B", 2, 6, 5)]),
            Testcase("reduce_window_sum_1d_last_axis", _window(lax.add, 0.0, (1, 3), (1, 1), ((2, 0), (0, 0))[::-1]),
                     [("B", 6)]),
            Testcase("reduce_window_sum_rank5", _window(lax.add, 0.0, (1, 1, 1, 2, 2), (1, 1, 1, 1, 2), "VALID"),
                     [("B", 2, 2, 3, 4)]),
            Testcase("reduce_window_sum_same_dilated_symbolic", _window(lax.add, 0.0, (1, 2, 2), (1, 2, 1), "SAME",
                                                                       wdil=(1, 2, 1)),
                     [(2, "H", "W")], check=_expect_pool("AveragePool", "Sum")),
            Testcase("reduce_window_sum_int32", _window(lax.add, 0, (2, 2), (1, 1), "SAME"), [spec("B", 4)],
                     expected_ops=["Slice"]),
            Testcase("reduce_window_sum_base_dilation", _window(lax.add, 0.0, (2, 2), (1, 1), "VALID", base=(1, 2)),
                     [("B", 3)], expected_ops=["Pad"]),
        ],
    ),
    Component(
        name="lax.reduce_window_max",
        onnx=["MaxPool"],
        since="v0.1.0",
        testcases=[
            Testcase("reduce_window_max_nhwc_same", _window(lax.max, -jnp.inf, (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
                     [("B", 5, 6, 2)], expected_ops=["MaxPool"]),
            Testcase("reduce_window_max_nchw_dilated", _window(lax.max, -jnp.inf, (1, 1, 2, 2), (1, 1, 1, 1),
                                                              ((0, 0), (0, 0), (1, 1), (0, 1)), wdil=(1, 1, 2, 1)),
                     [("B", 2, 5, 4)], expected_ops=["MaxPool"]),
            Testcase("reduce_window_max_same_strided_symbolic", _window(lax.max, -jnp.inf, (3, 1), (2, 1), "SAME"),
                     [("B", 3)], check=_expect_pool("MaxPool", "MaxPool"), forbidden_ops=["Pad"]),
            Testcase("reduce_window_max_int32", _window(lax.max, np.int32(np.iinfo(np.int32).min), (3,), (2,), "SAME"),
                     [spec("B")], expected_ops=["Max"]),
            # jnp.max-style windows over the lowest int (the padding must be that value, not -max)
            # and over uint64 on both sides of 2**63 (x64 variant; uint32 without x64)
            Testcase("reduce_window_max_int32_lowest", _window(lax.max, np.int32(np.iinfo(np.int32).min), (3,), (2,),
                                                               "SAME"),
                     input_values=[np.asarray([np.iinfo(np.int32).min] * 2 + [5, np.iinfo(np.int32).min], np.int32)]),
            Testcase("reduce_window_max_uint64",
                     lambda x: lax.reduce_window(x, jnp.zeros((), x.dtype), lax.max, (1, 2), (1, 1), "SAME"),
                     input_values=[np.asarray([[0, 2**63 + 5, 2**64 - 1, 7], [2**63, 1, 2**63 - 1, 2**62]], np.uint64)]),
            # bool windows are any/all (ONNX's Max takes no bool); bfloat16 pads with -inf
            Testcase("reduce_window_max_nan", lambda x: lax.reduce_window(x, -jnp.inf, lax.max, (1, 2), (1, 1), "SAME"),
                     input_values=[np.asarray([[np.nan, -np.inf, 2.5, -0.0], [1.5, np.nan, np.nan, 0.5]], np.float32)],
                     expected_ops=["MaxPool"]),
            Testcase("reduce_window_max_bool",
                     lambda x: lax.reduce_window(x, False, lax.max, (1, 3), (1, 2), "SAME"),
                     input_values=[np.asarray([[True, False, False, False, True], [False, False, True, False, False]])]),
            Testcase("reduce_window_max_bfloat16",
                     lambda x: lax.reduce_window(x.astype(jnp.bfloat16), -jnp.inf, lax.max, (1, 2), (1, 1),
                                                 "VALID").astype(x.dtype),
                     input_values=[np.asarray([[np.nan, -np.inf, 2.5, -0.0], [1.5, -2.25, 3.0, 0.5]], np.float32)]),
        ],
    ),
    Component(
        name="lax.reduce_window_min",
        onnx=["MaxPool", "Neg"],
        since="v0.1.0",
        testcases=[
            Testcase("reduce_window_min", _window(lax.min, jnp.inf, (1, 2, 3), (1, 1, 2), ((0, 0), (1, 0), (1, 1))),
                     [("B", 4, 6)], expected_ops=["MaxPool", "Neg"]),
            Testcase("reduce_window_min_int32", _window(lax.min, np.int32(np.iinfo(np.int32).max), (2, 2), (1, 1), "VALID"),
                     [spec("B", 3)], expected_ops=["Min"]),
            Testcase("reduce_window_min_nan", lambda x: lax.reduce_window(x, jnp.inf, lax.min, (1, 2), (1, 1), "VALID"),
                     input_values=[np.asarray([[np.nan, -np.inf, 2.5, -0.0], [1.5, np.nan, np.inf, 0.5]], np.float32)],
                     expected_ops=["MaxPool"]),
        ],
    ),
    Component(
        name="lax.reduce_window",
        onnx=["Slice", "Mul", "Max", "Min", "Add"],
        since="v0.1.0",
        testcases=[
            Testcase("reduce_window_prod", _window(lax.mul, 1.0, (1, 2), (1, 1), "SAME"), [("B", 4)],
                     expected_ops=["Mul"]),
            # A lambda body is not recognised as lax.add, so JAX keeps the generic primitive.
            Testcase("reduce_window_generic_add_body", _window(lambda a, b: a + b, 0.0, (2, 2), (1, 1), ((1, 0), (0, 1))),
                     [("B", 3)], check=_expect_pool("AveragePool", "Sum")),
            Testcase("reduce_window_max_runtime_init", lambda x, v: lax.reduce_window(x, v, lax.max, (1, 3), (1, 1), "SAME"),
                     [("B", 5), ()], expected_ops=["Max"]),
        ],
    ),
]

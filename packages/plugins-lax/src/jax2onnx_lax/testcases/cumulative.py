"""Testcases of :mod:`jax2onnx_lax.cumulative` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ._testdata import f32, ints, spec, uniform

_NAN_ROW = [f32([1.0, np.nan, 3.0, 0.0, -np.inf, 2.0], [-np.inf, -np.inf, 5.0, np.inf, 1.0, -1.0])]


def _cases(prim, fn, *, gen=None, ops=()):
    return [
        Testcase(f"{prim}_axis1", lambda x: fn(x, axis=1), [("B", 7)], expected_ops=ops, input_generator=gen),
        Testcase(f"{prim}_axis0_reverse", lambda x: fn(x, axis=0, reverse=True), [(5, "B")], expected_ops=ops,
                 input_generator=gen),
        # the scanned axis is symbolic: an ONNX Scan instead of the doubling chain
        Testcase(f"{prim}_symbolic_axis", lambda x: fn(x, axis=0), [("B", 3)], input_generator=gen),
        Testcase(f"{prim}_symbolic_axis_reverse", lambda x: fn(x, axis=1, reverse=True), [(2, "B", 2)],
                 input_generator=gen),
        Testcase(f"{prim}_int32", lambda x: fn(x, axis=1), [spec("B", 6)], input_generator=ints(-4, 5)),
        Testcase(f"{prim}_length_one", lambda x: fn(x, axis=1), [("B", 1)], input_generator=gen),
    ]


_SCAN_OPS = ["Pad", "Slice"]


components = [
    Component("lax.cumsum", onnx=["CumSum"], since="v0.7.0", testcases=[
        Testcase("cumsum_axis1", lambda x: lax.cumsum(x, axis=1), [("B", 5)], expected_ops=["CumSum"]),
        Testcase("cumsum_reverse", lambda x: lax.cumsum(x, axis=0, reverse=True), [("B", 3)], expected_ops=["CumSum"]),
        Testcase("cumsum_jnp_bool", lambda x: jnp.cumsum(x, axis=1), [spec("B", 4, dtype=jnp.bool_)]),
        Testcase("cumsum_int8_wraps", lambda x: lax.cumsum(x, axis=1), [spec("B", 6, dtype=jnp.int8)],
                 input_generator=ints(-128, 128)),
    ]),
    Component("lax.cumprod", onnx=["Mul", "Pad", "Slice", "Scan"], since="v0.7.0", testcases=[
        *_cases("cumprod", lax.cumprod, gen=uniform(0.5, 1.5), ops=["Mul", *_SCAN_OPS]),
        Testcase("cumprod_int8_wraps", lambda x: lax.cumprod(x, axis=1), [spec("B", 6, dtype=jnp.int8)],
                 input_generator=ints(-9, 10)),
    ]),
    Component("lax.cummax", onnx=["Max", "Pad", "Slice", "Scan"], since="v0.7.0", testcases=[
        *_cases("cummax", lax.cummax, ops=["Max", *_SCAN_OPS]),
        Testcase("cummax_nan_propagates", lambda x: lax.cummax(x, axis=1), input_values=_NAN_ROW),
        Testcase("cummax_jnp_maximum_accumulate", lambda x: jnp.maximum.accumulate(x, axis=0), [(4, 3)]),
    ]),
    Component("lax.cummin", onnx=["Min", "Pad", "Slice", "Scan"], since="v0.7.0", testcases=[
        *_cases("cummin", lax.cummin, ops=["Min", *_SCAN_OPS]),
        Testcase("cummin_nan_propagates", lambda x: lax.cummin(x, axis=1, reverse=True), input_values=_NAN_ROW),
        Testcase("cummin_uint8", lambda x: lax.cummin(x, axis=1), [spec("B", 5, dtype=jnp.uint8)],
                 input_generator=ints(0, 256)),
    ]),
    Component("lax.cumlogsumexp", onnx=["Max", "Exp", "Log", "Pad", "Slice", "Scan"], since="v0.7.0", testcases=[
        Testcase("cumlogsumexp_axis1", lambda x: lax.cumlogsumexp(x, axis=1), [("B", 6)], expected_ops=["Exp", "Log"]),
        Testcase("cumlogsumexp_reverse_large_values", lambda x: lax.cumlogsumexp(x * 300.0, axis=0, reverse=True),
                 [(5, "B")]),
        Testcase("cumlogsumexp_symbolic_axis", lambda x: lax.cumlogsumexp(x, axis=0), [("B", 3)], expected_ops=["Scan"],
                 run_static=False),
        Testcase("cumlogsumexp_infinities", lambda x: lax.cumlogsumexp(x, axis=1), input_values=_NAN_ROW),
        Testcase("cumlogsumexp_tiny_increments", lambda x: lax.cumlogsumexp(x, axis=1),
                 input_values=[f32([0.0, -40.0, -60.0, -80.0], [-1000.0, 0.0, -1000.0, -30.0])]),
    ]),
]

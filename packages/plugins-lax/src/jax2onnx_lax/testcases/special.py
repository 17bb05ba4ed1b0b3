"""Testcases of :mod:`jax2onnx_lax.special` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from .. import random_float_kernels as kernels
from ._testdata import SPECIAL, f32, log_scale, uniform

_TIGHT = dict(atol=1e-30, atol_f64=1e-300, rtol=2e-6, rtol_f64=1e-13)


#: erf_inv is XLA's kernel: float32 is bitwise a default jax.jit's on a CPU with FMA (XLA contracts
#: a*b + c there; tests/test_random_kernels.py checks 2**16 inputs bit for bit). The test session
#: compiles JAX at -O0, without that contraction: 2 ulps (1.9e-7 relative) measured against it.
#: float64: max 3 ulps (onnxruntime's Log, no FMA in float64).
_ERF_INV_ULPS = kernels.ulp_tolerance(2, 4)


_NEAR_ONE = f32(0.9, 0.99, 0.999, 0.9999, 0.99999, 0.999999, 0.9999999, -0.9999999, 1.0, -1.0, 1.5, 0.0, np.nan)


def _float32_nodes_at_most(n):
    def check(model, variant):
        if not variant.double:
            assert len(model.graph.node) <= n, f"{len(model.graph.node)} nodes in float32, budget {n}"

    return check


def _bf16(fn):
    return lambda x: fn(x.astype(jax.numpy.bfloat16)).astype(x.dtype)


components = [
    Component("lax.erf", onnx=["Erf"], since="v0.7.0", testcases=[
        Testcase("erf", lax.erf, [("B", 6)], input_generator=uniform(-4, 4), **_TIGHT),
        Testcase("erf_tiny", lax.erf, [("B", 6)], input_generator=log_scale(-30, -1), **_TIGHT),
        Testcase("erf_special_values", lax.erf, input_values=[SPECIAL], **_TIGHT),
        Testcase("erf_bfloat16", _bf16(lax.erf), [("B", 6)], rtol=2e-2, atol=1e-2, rtol_f64=2e-2, atol_f64=1e-2),
        Testcase("gelu_exact", lambda x: jax.nn.gelu(x, approximate=False), [("B", 6)], rtol_f64=1e-12),
    ]),
    Component("lax.erfc", onnx=["Exp", "Div"], since="v0.7.0", testcases=[
        Testcase("erfc", lax.erfc, [("B", 6)], input_generator=uniform(-4, 4), **_TIGHT),
        # large x: erfc is tiny and 1 - erf(x) would be 0
        Testcase("erfc_tail", lax.erfc, [("B", 6)], input_generator=uniform(2, 9), **_TIGHT),
        Testcase("erfc_special_values", lax.erfc, input_values=[SPECIAL], **_TIGHT),
        # the float32 form's seam (1 - Erf below 1, the fraction from 1) and its last normal values
        Testcase("erfc_seam_and_underflow", lax.erfc, input_values=[f32(0.999, 1.0, 1.001, 1.5, 9.0, 9.2, 9.3, 10.5,
                                                                     30.0, -9.5)], **_TIGHT),
        Testcase("erfc_compact_float32", lax.erfc, [("B", 6)], input_generator=uniform(-12, 12),
                 expected_ops=["Erf", "Exp"], expected_ops_f64=["Exp"], check=_float32_nodes_at_most(17), **_TIGHT),
    ]),
    Component("lax.erf_inv", onnx=["Log", "Sqrt", "Where"], since="v0.7.0", testcases=[
        Testcase("erf_inv", lax.erf_inv, [("B", 6)], input_generator=uniform(-0.99, 0.99), **_ERF_INV_ULPS),
        Testcase("erf_inv_near_one", lax.erf_inv, input_values=[_NEAR_ONE], **_ERF_INV_ULPS),
        Testcase("erf_inv_tiny", lax.erf_inv, [("B", 6)], input_generator=log_scale(-30, -1), **_ERF_INV_ULPS),
        # 1 - d is formed in the graph: in float64 it reaches past float32's last value below 1
        Testcase("erf_inv_extremes", lambda d: lax.erf_inv(1 - d), input_values=[f32(2.0**-52, 1e-12, 1e-9, 3e-16,
                                                                                     2e-16)],
                 **_ERF_INV_ULPS),
        Testcase("erf_inv_bfloat16", _bf16(lax.erf_inv), [("B", 6)], input_generator=uniform(-0.9, 0.9),
                 rtol=2e-2, atol=1e-2, rtol_f64=2e-2, atol_f64=1e-2),
    ]),
]

"""Testcases of :mod:`jax2onnx_lax.transcendental` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ._testdata import SPECIAL, f32, log_scale, uniform

_TIGHT = dict(atol=1e-30, atol_f64=1e-300, rtol=2e-6, rtol_f64=1e-13)


_INSIDE_UNIT = uniform(-0.999, 0.999)


def _component(prim, *, gen, onnx_ops, since="v0.7.0", tiny=True, extra=()):
    fn = getattr(lax, prim)
    cases = [Testcase(prim, fn, [("B", 5)], input_generator=gen, **_TIGHT)]
    if tiny:
        cases.append(Testcase(f"{prim}_tiny", fn, [("B", 5)], input_generator=log_scale(-30, -1), **_TIGHT))
    cases.append(Testcase(f"{prim}_special_values", fn, input_values=[SPECIAL], **_TIGHT))
    cases.append(Testcase(f"{prim}_bfloat16", lambda x: fn(x.astype(jax.numpy.bfloat16)).astype(x.dtype), [("B", 5)],
                          input_generator=gen, rtol=2e-2, atol=1e-2, rtol_f64=2e-2, atol_f64=1e-2))
    return Component(f"lax.{prim}", onnx=onnx_ops, since=since, testcases=cases + list(extra))


_ATAN2_VALUES = f32(0.0, -0.0, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.inf, 3.0, np.nan, 1e-30, -2.0)


components = [
    _component("tan", gen=uniform(-1.5, 1.5), onnx_ops=["Tan", "Sin", "Cos"]),
    _component("atan", gen=log_scale(-3, 3), onnx_ops=["Atan"]),
    _component("asin", gen=_INSIDE_UNIT, onnx_ops=["Asin", "Atan"]),
    _component("acos", gen=_INSIDE_UNIT, onnx_ops=["Acos", "Atan"], tiny=False),
    _component("sinh", gen=uniform(-5, 5), onnx_ops=["Sinh", "Exp"], since="v0.4.4",
               extra=[Testcase("sinh_large", lax.sinh, [("B", 3)], input_generator=uniform(700, 710), run_f64=True,
                               rtol=1e-4, rtol_f64=1e-13)]),
    _component("cosh", gen=uniform(-5, 5), onnx_ops=["Cosh", "Exp"], since="v0.4.4", tiny=False),
    _component("asinh", gen=log_scale(-3, 12), onnx_ops=["Asinh", "Log"]),
    _component("acosh", gen=uniform(1.0, 50.0), onnx_ops=["Acosh", "Log"], tiny=False,
               extra=[Testcase("acosh_huge", lax.acosh, [("B", 3)], input_generator=log_scale(8, 30, signed=False),
                               **_TIGHT)]),
    _component("atanh", gen=_INSIDE_UNIT, onnx_ops=["Atanh", "Log"]),
    _component("log1p", gen=uniform(-0.99, 10), onnx_ops=["Log"]),
    _component("expm1", gen=uniform(-20, 20), onnx_ops=["Exp", "Log"]),
    _component("cbrt", gen=log_scale(-20, 20), onnx_ops=["Pow"],
               extra=[Testcase("cbrt_perfect_cubes", lax.cbrt, input_values=[f32(27.0, -8.0, 1e-3, 125.0, 1e30)],
                               **_TIGHT)]),
    Component("lax.atan2", onnx=["Atan", "Div", "Where"], since="v0.7.0", testcases=[
        Testcase("atan2", lax.atan2, [("B", 6), ("B", 6)], **_TIGHT),
        Testcase("atan2_all_quadrants_and_zeros", lax.atan2, input_values=[_ATAN2_VALUES, np.roll(_ATAN2_VALUES, 3)],
                 **_TIGHT),
        Testcase("atan2_signed_zeros", lax.atan2,
                 input_values=[f32(0.0, -0.0, 0.0, -0.0, -0.0, 0.0), f32(-0.0, -0.0, 0.0, 0.0, -1.0, -1.0)], **_TIGHT),
    ]),
]

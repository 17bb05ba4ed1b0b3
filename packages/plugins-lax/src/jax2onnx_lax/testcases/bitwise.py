"""Testcases of :mod:`jax2onnx_lax.bitwise` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ..bitwise import LOGICAL
from ._testdata import ints, spec

_BOOL2 = [spec("B", 4, dtype=jnp.bool_)] * 2


_INT2 = [spec("B", 4)] * 2


_MIXED = ints(-2**31, 2**31 - 1)


_EDGE_X = np.array([1, 1, 1, 1, -1, -8, -8, 8, 2**31 - 1, -2**31], np.int32)


_EDGE_N = np.array([0, 31, 32, -1, 33, 1, 40, 3, 30, 31], np.int32)


def _logical_component(prim, bool_op, int_op):
    fn = getattr(lax, f"bitwise_{prim}")
    n = 1 if prim == "not" else 2
    return Component(f"lax.{prim}", onnx=[bool_op, int_op], since="v0.7.0", testcases=[
        Testcase(f"{prim}_bool", fn, _BOOL2[:n], expected_ops=[bool_op]),
        Testcase(f"{prim}_int32", fn, _INT2[:n], expected_ops=[int_op], input_generator=_MIXED),
        Testcase(f"{prim}_uint8", fn, [spec("B", 4, dtype=jnp.uint8)] * n, expected_ops=[int_op],
                 input_generator=ints(0, 256)),
    ])


def _shift_component(prim):
    fn = getattr(lax, prim)
    return Component(f"lax.{prim}", onnx=["BitShift"], since="v0.7.0", testcases=[
        Testcase(f"{prim}_int32", fn, [spec("B", 6), spec("B", 6)], expected_ops=["BitShift"],
                 input_generator=ints(-40, 40)),
        Testcase(f"{prim}_int32_edges", fn, input_values=[_EDGE_X, _EDGE_N], expected_ops=["BitShift"]),
        Testcase(f"{prim}_uint8", fn, [spec("B", 6, dtype=jnp.uint8)] * 2, input_generator=ints(0, 256)),
        Testcase(f"{prim}_int64", fn, input_values=[_EDGE_X.astype(np.int64) * 3, _EDGE_N.astype(np.int64) * 2]),
    ])


components = [
    *[_logical_component(p, b, i) for p, (b, i) in LOGICAL.items()],
    *[_shift_component(p) for p in ("shift_left", "shift_right_logical", "shift_right_arithmetic")],
    Component("lax.population_count", onnx=["BitShift", "BitwiseAnd", "ReduceSum"], since="v0.7.0", testcases=[
        Testcase("population_count_int32", lax.population_count, [spec("B", 4)], input_generator=_MIXED,
                 expected_ops=["BitShift", "ReduceSum"]),
        Testcase("population_count_uint8", lax.population_count, [spec("B", 4, dtype=jnp.uint8)],
                 input_generator=ints(0, 256)),
    ]),
    Component("lax.clz", onnx=["BitShift", "ReduceMax"], since="v0.7.0", testcases=[
        Testcase("clz_int32", lax.clz, [spec("B", 4)], input_generator=_MIXED, expected_ops=["ReduceMax"]),
        Testcase("clz_int32_edges", lax.clz, input_values=[np.array([0, 1, -1, 255, 2**30], np.int32)]),
        Testcase("clz_uint16", lax.clz, [spec("B", 4, dtype=jnp.uint16)], input_generator=ints(0, 65536)),
    ]),
]

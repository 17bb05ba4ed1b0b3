"""lax comparisons (eq, ne, lt, le, gt, ge) and select_n.

Comparisons follow IEEE like XLA (NaN compares unequal to everything, so ``ne`` is Not(Equal)).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.dtypes import ARITH, BOOL, is_bool
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import _numeric as nm
from . import complex_pairs as cp
from ._testdata import f32, ints
from .elementwise import one_to_one

lowerings = Lowerings()

_EQ_TYPES = ARITH | {BOOL}

#: lax primitive -> (ONNX op, dtypes onnxruntime compares natively). bool orders as 0 < 1 in uint8.
COMPARISONS: dict[str, tuple[str, frozenset]] = {
    "eq": ("Equal", _EQ_TYPES),
    "lt": ("Less", ARITH),
    "le": ("LessOrEqual", ARITH),
    "gt": ("Greater", ARITH),
    "ge": ("GreaterOrEqual", ARITH),
}


for _prim, (_op, _types) in COMPARISONS.items():
    # lax orders no complex numbers; eq compares (real, imag) pairs
    lowerings.add(_prim, one_to_one(_op), dtypes=_types, complex=cp.equal if _op == "Equal" else cp.unsupported)


@lowerings.register("ne", dtypes=_EQ_TYPES, complex=lambda ctx, x, y: ctx.op.Not(cp.equal(ctx, x, y)))
def lower_ne(ctx, x, y):
    return ctx.op.Not(ctx.op.Equal(x, y))


def _select(ctx, which, cases, dtype):
    if len(cases) == 1:
        return cases[0]
    if is_bool(ctx.avals_in[0].dtype):
        return nm.where(ctx, which, cases[1], cases[0], dtype)
    result = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        result = nm.where(ctx, ctx.op.Less(which, i + 1), cases[i], result, dtype)
    return result


def lower_select_n_complex(ctx, which, *cases):
    """Cases are (real, imag) pairs: a non-scalar predicate gets a trailing axis to cover both parts."""
    which = cp.lift(ctx, which) if ctx.avals_in[0].shape else which
    return _select(ctx, which, cases, cp.part_dtype(ctx.avals_out[0]))


@lowerings.register("select_n", complex=lower_select_n_complex)
def lower_select_n(ctx, which, *cases):
    """``cases[which]``. A bool ``which`` is one Where. An int ``which`` becomes a chain of
    ``Where(which < i, ...)`` from the last case down, which is also how JAX lowers it: indices past
    the end pick the last case and negative ones the first (lax leaves them undefined)."""
    return _select(ctx, which, cases, nm.dtype_of(ctx.avals_out[0]))


# ---------------------------------------------------------------------------------------------
# Testcases

_I32 = jnp.int32
_NANS = [f32(1.0, np.nan, np.nan, -0.0, np.inf), f32(1.0, 1.0, np.nan, 0.0, np.inf)]


def _spec(*shape, dtype=_I32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _comparison_component(prim, op, since):
    fn = getattr(lax, prim)
    ops = [op, "Not"] if prim == "ne" else [op]
    return Component(f"lax.{prim}", onnx=ops, since=since, testcases=[
        Testcase(prim, fn, [("B", 4), ("B", 4)], expected_ops=ops),
        Testcase(f"{prim}_int32", fn, [_spec("B", 4), _spec("B", 4)], expected_ops=ops),
        Testcase(f"{prim}_bool", fn, [_spec("B", 4, dtype=jnp.bool_), _spec("B", 4, dtype=jnp.bool_)]),
        Testcase(f"{prim}_nan_and_signed_zero", fn, input_values=_NANS, expected_ops=ops),
    ])


components = [
    _comparison_component("eq", "Equal", "v0.2.0"),
    _comparison_component("ne", "Equal", "v0.2.0"),
    _comparison_component("lt", "Less", "v0.2.0"),
    _comparison_component("le", "LessOrEqual", "v0.7.0"),
    _comparison_component("gt", "Greater", "v0.2.0"),
    _comparison_component("ge", "GreaterOrEqual", "v0.7.0"),
    Component("lax.select_n", onnx=["Where"], since="v0.2.0", testcases=[
        Testcase("select_n_bool_predicate_two_cases_float", lax.select_n,
                 [_spec("B", 3, dtype=jnp.bool_), ("B", 3), ("B", 3)], expected_ops=["Where"]),
        Testcase("select_n_bool_predicate_two_cases_int", lax.select_n,
                 [_spec("B", 3, dtype=jnp.bool_), _spec("B", 3), _spec("B", 3)], expected_ops=["Where"]),
        Testcase("select_n_bool_predicate_scalar_broadcast", lax.select_n,
                 [_spec(dtype=jnp.bool_), ("B", 3), ("B", 3)], expected_ops=["Where"]),
        Testcase("select_n_int_indices_three_cases", lax.select_n,
                 [_spec("B", 4), ("B", 4), ("B", 4), ("B", 4)], expected_ops=["Where", "Less"]),
        Testcase("select_n_int_indices_four_cases", lax.select_n,
                 [_spec("B", 4), ("B", 4), ("B", 4), ("B", 4), ("B", 4)], expected_ops=["Where", "Less"]),
        Testcase("select_n_bool_cases", lax.select_n, [_spec("B", 3, dtype=jnp.bool_)] * 3, expected_ops=["Where"]),
        Testcase("select_n_int16_cases", lambda p, a, b: lax.select_n(p, a, b),
                 [_spec("B", 3, dtype=jnp.bool_), _spec("B", 3, dtype=jnp.int16), _spec("B", 3, dtype=jnp.int16)]),
        Testcase("select_n_one_case", lambda x: lax.select_n(jnp.ones(x.shape, bool), x), [("B", 3)]),
        Testcase("where_jnp", lambda x, y: jnp.where(x > 0, x, y), [("B", 3), ("B", 3)], expected_ops=["Where"]),
        # out-of-range indices (negative, too large) pick the first/last case like JAX's lowering
        Testcase("select_n_int_indices_out_of_range", lax.select_n,
                 [_spec("B", 4), ("B", 4), ("B", 4), ("B", 4)], input_generator=ints(-3, 6)),
    ]),
]

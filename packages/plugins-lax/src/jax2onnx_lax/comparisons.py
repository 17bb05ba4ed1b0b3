"""lax comparisons (eq, ne, lt, le, gt, ge) and select_n.

Comparisons follow IEEE like XLA (NaN compares unequal to everything, so ``ne`` is Not(Equal)).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import _numeric as nm
from . import complex_pairs as cp
from ._testdata import f32, ints

lowerings = Lowerings()

_EQ_TYPES = nm.ARITH | {nm.BOOL}

#: lax primitive -> (ONNX op, dtypes onnxruntime compares natively). bool orders as 0 < 1 in uint8.
COMPARISONS: dict[str, tuple[str, frozenset]] = {
    "eq": ("Equal", _EQ_TYPES),
    "lt": ("Less", nm.ARITH),
    "le": ("LessOrEqual", nm.ARITH),
    "gt": ("Greater", nm.ARITH),
    "ge": ("GreaterOrEqual", nm.ARITH),
}


def _comparison(op_type: str, supported: frozenset):
    def lower(ctx, x, y):
        if cp.is_complex(ctx.avals_in[0]):
            if op_type != "Equal":  # lax orders no complex numbers
                raise NotImplementedError(f"{op_type} of complex values")
            return cp.equal(ctx, x, y)
        return nm.compute_in(ctx, [x, y], nm.dtype_of(ctx.avals_in[0]), supported,
                             lambda _c, a, b: getattr(ctx.op, op_type)(a, b), returns=nm.BOOL)

    lower.__name__ = f"lower_{op_type.lower()}"
    return lower


for _prim, (_op, _types) in COMPARISONS.items():
    lowerings.add(_prim, _comparison(_op, _types))


@lowerings.register("ne")
def lower_ne(ctx, x, y):
    return ctx.op.Not(_comparison("Equal", _EQ_TYPES)(ctx, x, y))


@lowerings.register("select_n")
def lower_select_n(ctx, which, *cases):
    """``cases[which]``. A bool ``which`` is one Where. An int ``which`` becomes a chain of
    ``Where(which < i, ...)`` from the last case down, which is also how JAX lowers it: indices past
    the end pick the last case and negative ones the first (lax leaves them undefined)."""
    dtype = nm.dtype_of(ctx.avals_out[0])
    if len(cases) == 1:
        return cases[0]
    which_dtype = nm.dtype_of(ctx.avals_in[0])
    if cp.is_complex(dtype):  # cases are (real, imag) pairs: the predicate broadcasts over both parts
        which, dtype = (cp.lift(ctx, which) if ctx.avals_in[0].shape else which), cp.part_dtype(dtype)
    if nm.is_bool(which_dtype):
        return nm.where(ctx, which, cases[1], cases[0], dtype)
    result = cases[-1]
    for i in range(len(cases) - 2, -1, -1):
        below = nm.compute_in(ctx, [which], which_dtype, nm.ARITH,
                              lambda c, w, i=i: ctx.op.Less(w, nm.const(ctx, i + 1, c)), returns=nm.BOOL)
        result = nm.where(ctx, below, cases[i], result, dtype)
    return result


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

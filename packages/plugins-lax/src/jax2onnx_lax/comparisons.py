"""lax comparisons (eq, ne, lt, le, gt, ge) and select_n.

Comparisons follow IEEE like XLA (NaN compares unequal to everything, so ``ne`` is Not(Equal)).
"""

from __future__ import annotations

from jax2onnx.dtypes import is_bool
from jax2onnx.plugin import Lowerings

from . import _numeric as nm
from . import complex_pairs as cp
from .elementwise import one_to_one

lowerings = Lowerings()


#: lax primitive -> (ONNX op, dtypes onnxruntime compares natively). bool orders as 0 < 1 in uint8.
COMPARISONS: dict[str, tuple[str, frozenset]] = {
    "eq": ("Equal", "Equal"),
    "lt": ("Less", "Less"),
    "le": ("LessOrEqual", "LessOrEqual"),
    "gt": ("Greater", "Greater"),
    "ge": ("GreaterOrEqual", "GreaterOrEqual"),
}


for _prim, (_op, _types) in COMPARISONS.items():
    # lax orders no complex numbers; eq compares (real, imag) pairs
    lowerings.add(_prim, one_to_one(_op), dtypes=_types, complex=cp.equal if _op == "Equal" else cp.unsupported)


@lowerings.register("ne", dtypes="Equal", complex=lambda ctx, x, y: ctx.op.Not(cp.equal(ctx, x, y)))
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

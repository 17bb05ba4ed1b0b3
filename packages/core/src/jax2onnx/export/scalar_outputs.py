"""Integer scalars a function returns: a Python ``int`` or a symbolic dimension (``x.shape[0]``,
``2 * x.shape[0]``) becomes a rank-0 integer output of the model with JAX's dtype for it: int32
(JAX's default int, which a returned ``3`` becomes under JAX), int64 only in double precision
(``enable_double_precision=True``, JAX's x64 mode). The published jax2onnx 0.17 gave int64 always.

Left to JAX, an int output would be a weak int32 array, and a ``_DimExpr`` cannot be a JAX output
at all. So the traced function hands JAX only its other outputs, and :class:`ScalarOutputs`
remembers where each integer sat among the output leaves (and JAX's int dtype at trace time); when
the model is assembled, a static int becomes a constant and a symbolic dim is computed from the
inputs' ``Shape`` (``Scope.dim``, cast to int32 where that is JAX's int), both rank 0 and in their
place among the outputs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
import onnx_ir as ir

from ..compat import is_dim_expr
from ..errors import UserFunctionError
from ..ir.builder import Scope


def is_int_scalar(leaf: Any) -> bool:
    """A Python int (not bool) or a symbolic dimension expression."""
    return (isinstance(leaf, int) and not isinstance(leaf, bool)) or is_dim_expr(leaf)


@dataclasses.dataclass
class ScalarOutputs:
    """The integer scalars among a traced function's output leaves, by leaf index."""

    n_leaves: int = 0
    scalars: dict[int, Any] = dataclasses.field(default_factory=dict)
    #: JAX's dtype for a Python int where the function was traced: int32, int64 under x64
    int_dtype: np.dtype = np.dtype(np.int32)

    def take(self, out: Any) -> list[Any]:
        """Record ``out``'s integer scalars and return its other leaves (what JAX traces)."""
        self.int_dtype = np.dtype(jax.dtypes.canonicalize_dtype(np.int64))
        leaves = jax.tree_util.tree_leaves(out)
        self.n_leaves = len(leaves)
        self.scalars = {i: leaf for i, leaf in enumerate(leaves) if is_int_scalar(leaf)}
        return [leaf for i, leaf in enumerate(leaves) if i not in self.scalars]

    def merge(self, scope: Scope, outs: list[ir.Value], avals: list[Any]) -> tuple[list[ir.Value], list[Any]]:
        """The model's outputs in the function's order: JAX's ``outs`` with the scalars put back."""
        if not self.scalars:
            return outs, avals
        it = iter(zip(outs, avals))
        merged: list[tuple[ir.Value, Any]] = []
        dtype = self.int_dtype
        aval = jax.ShapeDtypeStruct((), dtype)
        for i in range(self.n_leaves):
            d = self.scalars.get(i)
            if d is None:
                merged.append(next(it))
            elif is_dim_expr(d):
                dim = scope.op.Squeeze(scope.dim(d), scope.const(np.array([0], np.int64)))  # int64
                if dtype != np.int64:
                    dim = scope.op.Cast(dim, to=ir.DataType.INT32)
                merged.append((dim, aval))
            elif np.iinfo(dtype).min <= d <= np.iinfo(dtype).max:
                merged.append((scope.const(np.asarray(d, dtype=dtype)), aval))
            else:
                wider = (" (int64 needs enable_double_precision=True, JAX's x64 mode)"
                         if dtype != np.int64 else "")
                raise UserFunctionError(
                    f"output leaf {i} of the function is the Python int {d}, outside {dtype.name} (JAX's int "
                    f"dtype here, which JAX itself could not hold it in): return it as an array of a wider "
                    f"dtype{wider}, or a float")
        return [v for v, _ in merged], [a for _, a in merged]

__all__ = ["ScalarOutputs", "is_int_scalar"]

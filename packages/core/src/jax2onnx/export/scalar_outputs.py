"""Integer scalars a function returns: a Python ``int`` or a symbolic dimension (``x.shape[0]``,
``2 * x.shape[0]``) becomes an int64 scalar output of the model, as in the published jax2onnx.

Left to JAX, an int output would be a weak int32 array (int64 only in double precision), and a
``_DimExpr`` cannot be a JAX output at all. So the traced function hands JAX only its other
outputs, and :class:`ScalarOutputs` remembers where each integer sat among the output leaves; when
the model is assembled, a static int becomes an int64 constant and a symbolic dim is computed from
the inputs' ``Shape`` (``Scope.dim``), both rank 0 and in their place among the outputs.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np
import onnx_ir as ir

from .. import compat
from ..errors import UserFunctionError
from ..ir.builder import Scope


def is_int_scalar(leaf: Any) -> bool:
    """A Python int (not bool) or a symbolic dimension expression."""
    return (isinstance(leaf, int) and not isinstance(leaf, bool)) or compat.is_dim_expr(leaf)


@dataclasses.dataclass
class ScalarOutputs:
    """The integer scalars among a traced function's output leaves, by leaf index."""

    n_leaves: int = 0
    scalars: dict[int, Any] = dataclasses.field(default_factory=dict)

    def take(self, out: Any) -> list[Any]:
        """Record ``out``'s integer scalars and return its other leaves (what JAX traces)."""
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
        for i in range(self.n_leaves):
            d = self.scalars.get(i)
            if d is None:
                merged.append(next(it))
            elif compat.is_dim_expr(d):
                merged.append((scope.op.Squeeze(scope.dim(d), scope.const(np.array([0], np.int64))), _INT64))
            elif -(2**63) <= d < 2**63:
                merged.append((scope.const(np.asarray(d, dtype=np.int64)), _INT64))
            else:
                raise UserFunctionError(f"output leaf {i} of the function is the Python int {d}, outside int64: return it as an array")
        return [v for v, _ in merged], [a for _, a in merged]


_INT64 = jax.ShapeDtypeStruct((), np.dtype(np.int64))

__all__ = ["ScalarOutputs", "is_int_scalar"]

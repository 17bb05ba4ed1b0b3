"""Building blocks of the dense linear-algebra lowerings (ONNX has no factorisation ops).

Every algorithm works on the whole batch at once: a matrix operand is ``[..., m, n]`` with any
number of leading (possibly symbolic) batch dims, and a step of an algorithm that touches "row k"
does so through a mask ``rows == k`` rather than an index, so one ``Loop`` body serves every batch
element. Picking a row or column is ``ReduceSum(Where(mask, A, 0))``: exact (a sum of one value
and zeros), and NaN/inf in the rows not picked stay out of it (a one-hot MatMul would turn
``0 * inf`` into NaN).

Matrix sizes must be static (JAX knows them for every jnp.linalg call); batch dims may be symbolic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
import onnx_ir as ir
from jax2onnx import compat

from .control_flow import BOOL_SCALAR, INT64_SCALAR, as_list


def static_matrix_dims(ctx: Any, aval: Any, what: str) -> tuple[int, int]:
    """The static ``(m, n)`` of a ``[..., m, n]`` operand, or a clear error."""
    shape = aval.shape
    if len(shape) < 2:
        raise NotImplementedError(f"{ctx.primitive}: {what} must be a matrix [..., m, n], got shape {shape}")
    m, n = shape[-2], shape[-1]
    if compat.is_symbolic_dim(m) or compat.is_symbolic_dim(n):
        raise NotImplementedError(
            f"{ctx.primitive}: the matrix dims of {what} must be static for the ONNX export (got {shape}); "
            "leading batch dims may be symbolic. Export with concrete matrix sizes."
        )
    return int(m), int(n)


def require_real(ctx: Any, what: str = "operand") -> None:
    for aval in list(ctx.avals_in) + list(ctx.avals_out):
        if np.dtype(aval.dtype).kind == "c":
            raise NotImplementedError(
                f"{ctx.primitive}: complex {what}s are not supported by the ONNX linear-algebra lowerings "
                "(real float32/float64 only). Split the problem into real and imaginary parts before export."
            )


def aval(shape: Sequence[Any], dtype: Any) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(tuple(shape), np.dtype(dtype))


def loop(where: Any, trips: Any, state: Sequence[tuple[ir.Value, Any]], body: Callable[..., Sequence[ir.Value]],
         name: str, *, until: Callable[..., ir.Value] | None = None, scans: Sequence[Any] = ()) -> list[ir.Value]:
    """An ONNX ``Loop`` of ``trips`` iterations (int, or an int64 scalar value) over the state
    ``[(initial value, aval)]``. ``body(sub, k, *state) -> new state`` builds the body in ``sub``
    (``k`` is the int64 iteration number). With ``until(sub, *new_state) -> bool scalar`` the loop
    also stops early once it is true (checked at the end of each iteration). ``scans`` are the avals
    of per-iteration outputs the body returns after the state; the Loop stacks them on a new
    leading axis (returned after the final state)."""
    sub = where.subgraph(name)
    k = sub.add_input("k", INT64_SCALAR)
    sub.add_input("cond_in", BOOL_SCALAR)
    carried = [sub.add_input(f"{name}_state", a) for _, a in state]
    new = list(body(sub, k, *carried))
    keep = sub.op.Not(until(sub, *new[: len(state)])) if until is not None else sub.const(np.asarray(True))
    graph = sub.finish([keep, *new], [BOOL_SCALAR, *[a for _, a in state], *scans])
    m = where.i64(trips) if isinstance(trips, (int, np.integer)) else trips
    outs = as_list(where.op.Loop(m, None, *[v for v, _ in state], body=graph, _outputs=len(state) + len(scans)))
    for v, (_, a) in zip(outs, state, strict=False):
        where.set_aval(v, a)
    return outs


def iota(where: Any, n: int, shape: Sequence[int] | None = None) -> ir.Value:
    """``arange(n)`` as int64, reshaped to ``shape`` (``[n, 1]`` for a row index)."""
    a = np.arange(n, dtype=np.int64)
    return where.const(a.reshape(shape) if shape is not None else a)


def pick(where: Any, x: ir.Value, mask: ir.Value, axis: int, keepdims: bool = True) -> ir.Value:
    """The slice of ``x`` along ``axis`` where ``mask`` (broadcastable, one-hot along ``axis``) holds."""
    zero = np.zeros((), dtype=np.int64) if x.type is not None and x.type.dtype == ir.DataType.INT64 else 0
    return where.op.ReduceSum(where.op.Where(mask, x, zero), where.i64([axis]), keepdims=int(keepdims))


def index1(where: Any, k: ir.Value) -> ir.Value:
    """A scalar int64 index as shape ``[1]``, for :func:`take`."""
    return where.op.Reshape(k, where.i64([1]))


def take(where: Any, x: ir.Value, k1: ir.Value, axis: int) -> ir.Value:
    """The slice of ``x`` at index ``k1`` (shape ``[1]``, non-negative) along ``axis``, kept as a
    size-1 axis. A Gather: exact and much cheaper in a Loop body than a masked reduction."""
    return where.op.Gather(x, k1, axis=axis)


def swap_last_axes(where: Any, x: ir.Value, rank: int) -> ir.Value:
    perm = list(range(rank - 2)) + [rank - 1, rank - 2]
    return where.op.Transpose(x, perm=perm)


def eye(n: int, m: int | None, dtype: Any) -> np.ndarray:
    return np.eye(n, m if m is not None else n, dtype=np.dtype(dtype))


def batch_shape(aval_: Any) -> tuple[Any, ...]:
    return tuple(aval_.shape[:-2])


def expand_to(where: Any, x: ir.Value, shape: Sequence[Any]) -> ir.Value:
    """``x`` broadcast to ``shape`` (symbolic dims computed in the graph)."""
    return where.op.Expand(x, where.shape_tensor(list(shape)))

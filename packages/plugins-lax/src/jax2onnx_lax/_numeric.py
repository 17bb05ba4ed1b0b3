"""Numeric helpers shared by the elementwise, reduction and cumulative lowerings.

The dtype sets and :func:`~jax2onnx.dtypes.carrier` live in :mod:`jax2onnx.dtypes`; a lowering whose
op lacks kernels for some dtypes says so with ``register(..., dtypes=...)`` and core casts. What is
left here is :func:`compute_in` for the carriers core's facet does not pick: an op inside a lowering
(:func:`where`), and sums that may travel in a carrier that breaks the order (uint64 in int64).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
from jax2onnx.dtypes import BOOL, FLOATS, carrier


def dtype_of(aval: Any) -> np.dtype:
    return np.dtype(aval.dtype)


def compute_in(
    ctx: Any,
    xs: Sequence[ir.Value],
    dtype: Any,
    supported: Iterable[np.dtype],
    fn: Callable[..., ir.Value],
    *,
    returns: Any = None,
    keep_order: bool = True,
) -> ir.Value:
    """``fn(carrier_dtype, *xs)`` evaluated in the carrier of ``dtype``.

    ``fn`` returns a value of the carrier dtype, which is cast back to ``dtype``; or, when
    ``returns`` is given (``BOOL`` for comparisons), a value of that dtype, returned as is.
    """
    dtype = np.dtype(dtype)
    c = carrier(dtype, supported, keep_order=keep_order)
    ys = [ctx.cast(x, c) for x in xs]
    result = fn(c, *ys)
    if returns is not None or c == dtype:  # a Scan output may carry no type for ctx.cast to see
        return result
    return ctx.cast(result, dtype)


def uint64_order_key(ctx: Any, x: ir.Value) -> ir.Value:
    """uint64 as int64 with the sign bit flipped: a bijection that keeps the unsigned order, for the
    order-based ops onnxruntime has no uint64 kernel for (and uint64 has no wider carrier). It is
    its own inverse: ``Cast(uint64_order_key(key) as int64 -> uint64)`` gives the value back."""
    sign = ctx.const(np.iinfo(np.int64).min, np.int64)
    return ctx.op.BitwiseXor(ctx.cast(x, np.dtype(np.int64)), sign)


def where(ctx: Any, cond: ir.Value, a: ir.Value, b: ir.Value, dtype: Any) -> ir.Value:
    """``Where(cond, a, b)`` for any dtype (bool/int16/bfloat16 cases travel in a carrier)."""
    return compute_in(ctx, [a, b], dtype, ctx.kernel_dtypes("Where"), lambda _c, x, y: ctx.op.Where(cond, x, y), keep_order=False)


def dtype_min(dtype: Any) -> Any:
    """Smallest value of ``dtype`` (-inf for floats): the identity of max."""
    dtype = np.dtype(dtype)
    if dtype in FLOATS:
        return -np.inf
    if dtype == BOOL:
        return False
    return np.iinfo(dtype).min


def dtype_max(dtype: Any) -> Any:
    dtype = np.dtype(dtype)
    if dtype in FLOATS:
        return np.inf
    if dtype == BOOL:
        return True
    return np.iinfo(dtype).max

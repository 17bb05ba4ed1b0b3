"""Numeric helpers shared by the elementwise, reduction and cumulative lowerings.

The dtype sets and :func:`carrier` live in :mod:`jax2onnx.dtypes`; :func:`compute_in` casts to the
carrier and back for lowerings that pick their carrier per operand.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
from jax2onnx.dtypes import (  # noqa: F401 - the dtype sets and carrier live in core; re-exported for this pack
    ARG_MINMAX,
    ARITH,
    BF16,
    BOOL,
    CUMSUM,
    F16,
    F32,
    F64,
    FLOAT_MATH,
    FLOATS,
    I8,
    I16,
    I32,
    I64,
    INTS,
    MINMAX,
    PAD,
    POW,
    REDUCE_MINMAX,
    REDUCE_SUM,
    U8,
    U16,
    U32,
    U64,
    WHERE,
    bits,
    carrier,
    is_bool,
    is_float,
    is_int,
    is_unsigned,
    signed_of,
    unsigned_of,
)


def dtype_of(aval: Any) -> np.dtype:
    return np.dtype(aval.dtype)


def cast(ctx: Any, v: ir.Value, dtype: Any) -> ir.Value:
    return ctx.op.Cast(v, to=int(ctx.onnx_dtype(np.dtype(dtype))))


def cast_if(ctx: Any, v: ir.Value, src: Any, dst: Any) -> ir.Value:
    return v if np.dtype(src) == np.dtype(dst) else cast(ctx, v, dst)


def const(ctx: Any, value: Any, dtype: Any) -> ir.Value:
    """A constant of exactly ``dtype`` (a bare Python float would become float64)."""
    return ctx.const(np.asarray(value, dtype=np.dtype(dtype)))


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
    ys = [cast_if(ctx, x, dtype, c) for x in xs]
    result = fn(c, *ys)
    if returns is not None:
        return result
    return cast_if(ctx, result, c, dtype)


def where(ctx: Any, cond: ir.Value, a: ir.Value, b: ir.Value, dtype: Any) -> ir.Value:
    """``Where(cond, a, b)`` for any dtype (bool/int16/bfloat16 cases travel in a carrier)."""
    return compute_in(ctx, [a, b], dtype, WHERE, lambda _c, x, y: ctx.op.Where(cond, x, y), keep_order=False)


def const_value(v: ir.Value) -> np.ndarray | None:
    """The numpy value of ``v`` when it is an initializer (a literal or a constant), else None."""
    if v is not None and v.const_value is not None:
        return v.const_value.numpy()
    return None


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

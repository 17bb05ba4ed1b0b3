"""Numeric helpers shared by the elementwise, reduction and cumulative lowerings.

onnxruntime's CPU kernels cover fewer dtypes than the ONNX spec (``Tan`` has no float64 kernel,
``Where`` none for bool/int16/bfloat16, ``BitShift`` only unsigned, ...). A lowering names the dtypes
its op runs on; :func:`carrier` picks the narrowest dtype that holds the operand exactly, and
:func:`compute_in` casts there and back. The sets below were measured on onnxruntime 1.32 (CPU).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

try:  # bfloat16 as a numpy dtype ships with jax (ml_dtypes)
    from ml_dtypes import bfloat16 as _bf16
except ImportError:  # pragma: no cover - jax always brings ml_dtypes
    _bf16 = None

BOOL = np.dtype(np.bool_)
I8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
U8, U16, U32, U64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
F16, F32, F64 = (np.dtype(t) for t in (np.float16, np.float32, np.float64))
BF16 = np.dtype(_bf16) if _bf16 is not None else None

INTS = frozenset({I8, I16, I32, I64, U8, U16, U32, U64})
FLOATS = frozenset(t for t in (F16, F32, F64, BF16) if t is not None)
#: Add/Sub/Mul/Div/Mod/Abs/Sign/Equal/Less...: every int and float except bfloat16.
ARITH = frozenset(INTS | {F16, F32, F64})
#: Exp/Log/Sqrt/Sin/Cos/Tanh/Sigmoid/Floor/Ceil/Round/Reciprocal. float16 is computed in float32
#: like XLA does on CPU (one rounding at the end).
FLOAT_MATH = frozenset({F32, F64})
MINMAX = frozenset({F32, F64, F16, I8, I32, I64, U8, U32, U64})
WHERE = frozenset({F32, F64, F16, I8, I32, I64, U8, U32})
REDUCE_SUM = frozenset({F32, F64, I32, I64})
REDUCE_MINMAX = frozenset({F32, F64, I8, I32, I64, U8, BOOL})
ARG_MINMAX = frozenset({F32, F64, I8, I32, I64, U8})
PAD = frozenset({F32, F64, F16, I8, I32, I64, U8, U32, U64, BOOL})
CUMSUM = frozenset({F32, F64, I32, I64})
POW = frozenset({F32, F64, I32, I64})


def dtype_of(aval: Any) -> np.dtype:
    return np.dtype(aval.dtype)


def is_float(dtype: Any) -> bool:
    return np.dtype(dtype) in FLOATS


def is_int(dtype: Any) -> bool:
    return np.dtype(dtype) in INTS


def is_unsigned(dtype: Any) -> bool:
    return np.dtype(dtype).kind == "u"


def is_bool(dtype: Any) -> bool:
    return np.dtype(dtype) == BOOL


def bits(dtype: Any) -> int:
    return np.dtype(dtype).itemsize * 8


def unsigned_of(dtype: Any) -> np.dtype:
    return np.dtype(f"u{np.dtype(dtype).itemsize}")


def signed_of(dtype: Any) -> np.dtype:
    return np.dtype(f"i{np.dtype(dtype).itemsize}")


# Wider dtypes that hold every value of a dtype exactly and keep its order.
_WIDER: dict[np.dtype, tuple[np.dtype, ...]] = {
    BOOL: (U8, I32, I64),
    I8: (I32, I64),
    I16: (I32, I64),
    I32: (I64,),
    U8: (I32, I64),
    U16: (I32, U32, I64),
    U32: (I64,),
    F16: (F32, F64),
    F32: (F64,),
}
if BF16 is not None:
    _WIDER[BF16] = (F32, F64)


def carrier(dtype: Any, supported: Iterable[np.dtype], *, keep_order: bool = True) -> np.dtype:
    """The dtype to compute in: ``dtype`` itself when supported, else a wider exact one.

    With ``keep_order=False`` (pure data movement like ``Where``/``Pad``), uint64 may travel as int64
    (a bijection, but not order preserving).
    """
    dtype = np.dtype(dtype)
    supported = set(supported)
    if dtype in supported:
        return dtype
    for wider in _WIDER.get(dtype, ()):
        if wider in supported:
            return wider
    if not keep_order and dtype in INTS and signed_of(dtype) in supported:
        return signed_of(dtype)
    names = sorted(t.name for t in supported)
    raise NotImplementedError(f"no onnxruntime kernel for {dtype.name} here (supported: {names})")


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

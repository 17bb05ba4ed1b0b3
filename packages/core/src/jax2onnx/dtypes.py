"""Dtypes and the onnxruntime kernels that cover them.

onnxruntime's CPU kernels cover fewer dtypes than the ONNX spec (``Tan`` has no float64 kernel,
``Where`` none for bool/int16/bfloat16, ``BitShift`` only unsigned, ...). A lowering names the dtypes
its op runs on (``Lowerings.register(..., dtypes=FLOAT_MATH)``); :func:`carrier` picks the narrowest
dtype that holds an operand exactly, and the interpreter casts there and back. The sets below were
measured on onnxruntime 1.32 (CPU).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

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
#: TopK (every sort): no unsigned type wider than 8 bits (uint64 sorts by an order key, see the lax pack).
TOPK = frozenset(ARITH - {U16, U32, U64})
POW = frozenset({F32, F64, I32, I64})


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

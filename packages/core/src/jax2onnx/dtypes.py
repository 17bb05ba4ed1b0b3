"""Dtypes, their carriers, and the dtype sets of JAX's semantics.

What onnxruntime has kernels for is not here: :mod:`jax2onnx.ir.runtime` answers it from the
measured kernel tables (a lowering names its op: ``register(..., dtypes="Max")``). The sets below
say what JAX computes, whatever the runtime offers; :func:`carrier` picks the narrowest dtype that
holds an operand exactly, and the interpreter casts there and back.
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
#: JAX semantics, not runtime support: XLA on CPU computes float16/bfloat16 math (Exp, Log, Sin,
#: Pow, ...) and sums in float32, one rounding at the end; lowerings compute there too.
HALF_FLOATS = frozenset(t for t in (F16, BF16) if t is not None)
#: JAX semantics: the dtypes transcendental math is computed in (half floats in float32, see above).
FLOAT_MATH = frozenset({F32, F64})


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

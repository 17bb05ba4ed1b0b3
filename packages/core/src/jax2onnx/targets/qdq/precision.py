"""``Precision("qdq", ...)``: the NPU form's fields, each checked once with one line per mistake.

``activations``: ``"uint16"`` (default; NPUs such as Qualcomm's HTP run 16-bit activations with
8-bit weights, "A16W8", at little accuracy cost) or ``"uint8"`` (A8W8: the smallest and fastest,
further from float32). ``weights``: ``"int8"`` (default; symmetric per output channel, the form
NPUs take per-channel scales in), ``"uint8"`` (asymmetric per output channel) or ``"int4"``
(symmetric blocks of ``block_size`` along K: opset 21's blocked ``DequantizeLinear``).
``calibration``: input batches, as for int4's (checked by the precision stage before this form
sees them); none: the export's probe set (:mod:`jax2onnx.precision.ranges`). ``dims``: a size per
symbolic input axis.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ...errors import PrecisionError

#: int4 weights' block sizes along K (as int4's MatMulNBits blocks)
BLOCK_SIZES = (16, 32, 64, 128, 256)
ACTIVATIONS = ("uint16", "uint8")
WEIGHTS = ("int8", "uint8", "int4")
#: the fields of Precision the QDQ form reads; any other set away from its default is refused
_READ = {"kind", "activations", "weights", "calibration", "block_size", "dims", "keep_io_types"}


def describe(p: Any) -> str:
    block = f" (blocks of {p.block_size})" if p.weights == "int4" else ""
    return f"qdq: {p.activations} activations, {p.weights} weights{block}, min/max scales"


def checked_qdq(p: Any, enable_double_precision: bool = False) -> Any:
    """``p`` (a :class:`jax2onnx.Precision` of kind ``"qdq"``, its calibration batches checked)
    checked, its defaults filled and its ``dims`` a sorted tuple of pairs."""
    if enable_double_precision:
        raise PrecisionError("precision='qdq' quantizes a float32 export; drop enable_double_precision=True")
    defaults = type(p)()
    for field in dataclasses.fields(p):
        if field.name not in _READ and getattr(p, field.name) != getattr(defaults, field.name):
            raise PrecisionError(f"{field.name}= is not read by Precision('qdq', ...) (it takes activations=, weights=, "
                                 f"calibration=, block_size= and dims=); drop {field.name}=")
    if p.keep_io_types is not True:
        raise PrecisionError("keep_io_types=False: Precision('qdq') keeps float32 inputs and outputs (the graph "
                             "quantizes them at its edges); drop keep_io_types")
    activations = "uint16" if p.activations is None else p.activations
    if activations not in ACTIVATIONS:
        raise PrecisionError(f"activations={p.activations!r}: Precision('qdq') takes 'uint16' (default, A16W8) or "
                             "'uint8' (A8W8), one calibrated scale and zero point per tensor")
    weights = "int8" if p.weights is None else p.weights
    if weights not in WEIGHTS:
        raise PrecisionError(f"weights={p.weights!r}: Precision('qdq') takes 'int8' (default, symmetric per channel), "
                             "'uint8' (asymmetric per channel) or 'int4' (symmetric blocks of block_size)")
    if p.block_size not in BLOCK_SIZES:
        raise PrecisionError(f"block_size={p.block_size!r}: use one of {', '.join(map(str, BLOCK_SIZES))} (int4 "
                             "weights' blocks along K)")
    return dataclasses.replace(p, activations=activations, weights=weights, dims=_checked_dims(p.dims))


def _checked_dims(dims: object) -> tuple[tuple[str, int], ...]:
    if dims is None or dims == ():
        return ()
    if isinstance(dims, tuple) and all(isinstance(d, tuple) and len(d) == 2 for d in dims):
        dims = dict(dims)  # already checked once (a Precision passed through parse twice)
    if not isinstance(dims, Mapping):
        raise PrecisionError(f"dims takes a mapping from symbolic axis name to size ({{'B': 1}}), got "
                             f"{type(dims).__name__} {dims!r}")
    for name, size in dims.items():
        if not isinstance(name, str):
            raise PrecisionError(f"dims: keys are the symbolic axes' names as in the input specs ('B'), got {name!r}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise PrecisionError(f"dims[{name!r}]={size!r}: give a positive int (the static size the graph takes)")
    return tuple(sorted(dims.items()))


__all__ = ["ACTIVATIONS", "WEIGHTS", "checked_qdq", "describe"]

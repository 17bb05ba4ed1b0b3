"""Which graph values provably hold no NaN: where a NaN guard (:func:`jax2onnx.fusion.max_pool`)
has nothing to guard, the bare op is exact.

A value is NaN-free when its type has no NaN (integers, bool), when it is a constant without NaN,
or when the node producing it cannot make a NaN out of inputs that hold none and those inputs are
NaN-free. That last kind is the list below: ops that move, pick or compare values (Transpose,
Gather, Where, Max, Relu, Clip, MaxPool, ...) and the unary maps defined at ±inf (Exp, Tanh,
Sigmoid, Abs, Neg, Floor, ...). Arithmetic that can (Add/Sub: inf - inf, Mul: 0 * inf, Div,
MatMul, Conv, ReduceSum, AveragePool) is not in it, so neither is anything downstream of a graph's
float input through them: the analysis answers "may hold NaN" there, and the guard stays.

Typical NaN-free inputs: an integer input cast to float (pixels, one-hot codes), an embedding
table's rows picked by token ids (a Gather of a constant), and such values moved, clipped or
rectified. The walk stops after :data:`_MAX_DEPTH` producers (then: may hold NaN).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

#: Ops whose outputs hold no NaN when their float inputs hold none (their non-float inputs:
#: indices, shapes, axes, conditions, never matter).
_KEEP_NAN_FREE = frozenset({
    # moving and picking values
    "Identity", "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Tile", "Slice",
    "Concat", "Split", "Gather", "GatherElements", "GatherND", "Where", "Pad", "Cast", "DepthToSpace",
    "SpaceToDepth", "ReverseSequence",
    # picking by order
    "Max", "Min", "Clip", "Relu", "MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin", "TopK",
    # unary maps defined on all of [-inf, inf] (not Softsign: inf / (1 + inf); not LeakyRelu:
    # its alpha may be 0, and 0 * -inf is NaN)
    "Abs", "Neg", "Sign", "Floor", "Ceil", "Round", "Exp", "Sigmoid", "Tanh", "Erf", "HardSigmoid",
    "Elu", "Selu", "Celu",
})

_MAX_DEPTH = 64
#: the most elements of a constant scanned for NaN (64 MiB of float32)
_MAX_SCANNED = 1 << 24


def _has_float_nan(dtype: ir.DataType | None) -> bool:
    """Whether values of ``dtype`` can be NaN (unknown: yes)."""
    if dtype is None:
        return True
    try:
        return np.dtype(dtype.numpy()).kind in "fc"
    except (TypeError, ValueError, NotImplementedError):
        return True  # float8 and other types numpy does not name: assume they can


def _constant_nan_free(tensor: Any) -> bool:
    """A constant without NaN. Weights read only as they are written (lazy, external) and very
    large ones are not read here (an export streams them once, and scanning them per pool would
    cost more than it saves): they may hold NaN."""
    if isinstance(tensor, (ir.LazyTensor, ir.ExternalTensor)) or getattr(tensor, "size", _MAX_SCANNED + 1) > _MAX_SCANNED:
        return False
    try:
        array = tensor.numpy()
    except Exception:  # noqa: BLE001 - a tensor not readable here (external, lazy): may hold NaN
        return False
    return not (np.asarray(array).dtype.kind in "fc" and np.isnan(array).any())


def is_nan_free(value: ir.Value | None) -> bool:
    """Whether ``value`` provably holds no NaN, whatever the graph's inputs are."""
    seen: dict[int, bool] = {}
    return _nan_free(value, seen, 0)


def _nan_free(value: ir.Value | None, seen: dict[int, bool], depth: int) -> bool:
    if value is None:
        return True  # an omitted optional input
    if not _has_float_nan(value.dtype):
        return True
    key = id(value)
    if key in seen:
        return seen[key]
    seen[key] = False  # a cycle (none in a valid graph) or a value still being decided: may hold NaN
    result = False
    if value.const_value is not None:
        result = _constant_nan_free(value.const_value)
    elif depth < _MAX_DEPTH:
        node = value.producer()
        if node is not None and node.domain in ("", "ai.onnx"):
            if node.op_type == "Constant":
                attr = node.attributes.get("value")
                result = attr is not None and _constant_nan_free(attr.value)
            elif node.op_type in _KEEP_NAN_FREE:
                result = all(_nan_free(v, seen, depth + 1) for v in node.inputs)
    seen[key] = result
    return result


__all__ = ["is_nan_free"]

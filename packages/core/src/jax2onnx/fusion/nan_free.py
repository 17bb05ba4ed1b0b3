"""Which graph values provably hold no NaN: where a NaN guard (:func:`jax2onnx.fusion.max_pool`)
has nothing to guard, the bare op is exact.

A value is NaN-free when its type has no NaN (integers, bool), when it is a constant without NaN,
or when the node producing it cannot make a NaN out of inputs that hold none and those inputs are
NaN-free. That last kind is the list below: ops that move, pick or compare values (Transpose,
Gather, Where, Max, Relu, Clip, MaxPool, ...) and the unary maps defined at ±inf (Exp, Tanh,
Sigmoid, Abs, Neg, Floor, ...). Arithmetic can make NaN out of NaN-free values (Add/Sub:
inf - inf, Mul: 0 * inf, Div, MatMul, Conv), so it is not in that list; downstream of a graph's
float input through it the analysis answers "may hold NaN", and the guard stays.

Arithmetic is followed where it is bounded (:func:`_bound`): a value whose magnitude is provably
below its float type's largest finite number is finite, hence NaN-free, and sums, products,
divisions by constants without zeros, and Conv/MatMul/Gemm/BatchNormalization with constant weights
of such values are bounded in turn (integers by their type's range, constants by their largest
entry). So an image model fed integer pixels (Cast, scale, Conv, BatchNormalization, Relu, MaxPool)
needs no guard, where one fed floats does.

Typical NaN-free inputs: an integer input cast to float (pixels, one-hot codes), an embedding
table's rows picked by token ids (a Gather of a constant), such values moved, clipped or
rectified, and bounded arithmetic on them. The walk stops after :data:`_MAX_DEPTH` producers
(then: may hold NaN).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from ..ir.constants import constant_tensor

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
#: node metadata that names a NaN guard's ``If`` (value: what it guards, ``"max_pool"``), for the
#: passes that move it or make it one check of the model's inputs (:mod:`jax2onnx.passes.nan_guard_hoist`)
NAN_GUARD_KEY = "jax2onnx:nan_guard"
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


def _readable(tensor: Any) -> np.ndarray | None:
    """A constant's values, unless it is read only as it is written (lazy, external: an export
    streams those once) or very large (scanning it per pool would cost more than it saves)."""
    if tensor is None or isinstance(tensor, (ir.LazyTensor, ir.ExternalTensor)):
        return None
    if getattr(tensor, "size", _MAX_SCANNED + 1) > _MAX_SCANNED:
        return None
    try:
        return np.asarray(tensor.numpy())
    except Exception:  # noqa: BLE001 - a tensor not readable here: unknown
        return None


def _constant_values(value: ir.Value | None, depth: int = 0) -> np.ndarray | None:
    """A constant's values, also through the Transpose/Reshape/Identity the lowering put on a
    weight before constant folding (a Conv's kernel is a Transpose of the layer's)."""
    array = _readable(constant_tensor(value, lazy=False))
    node = value.producer() if array is None and value is not None and depth < 8 else None
    if node is None or node.domain not in ("", "ai.onnx") or not node.inputs:
        return array
    inner = _constant_values(node.inputs[0], depth + 1)
    if inner is None:
        return None
    if node.op_type == "Identity":
        return inner
    if node.op_type == "Transpose":
        perm = node.attributes.get("perm")
        return np.transpose(inner, None if perm is None else list(perm.value))
    if node.op_type == "Reshape" and len(node.inputs) > 1:
        shape = _readable(constant_tensor(node.inputs[1], lazy=False))
        if shape is None or ("allowzero" in node.attributes and node.attributes["allowzero"].value):
            return None
        dims = [inner.shape[i] if int(d) == 0 else int(d) for i, d in enumerate(shape.reshape(-1))]
        try:
            return inner.reshape(dims)
        except ValueError:
            return None
    return None


def _constant_nan_free(tensor: Any) -> bool:
    """A constant without NaN (one not read here may hold NaN)."""
    array = _readable(tensor)
    return array is not None and not (array.dtype.kind in "fc" and np.isnan(array).any())


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
            if not result:
                result = _bound(value, {}, depth) is not None
    seen[key] = result
    return result


# ---------------------------------------------------------------------------------------------
# Bounds: |value| <= bound, finite


#: ops whose output's magnitude is at most their float inputs' largest bound (their integer inputs
#: are indices, shapes, axes or conditions)
_WITHIN_INPUTS = frozenset({
    "Identity", "Transpose", "Reshape", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Tile", "Slice",
    "Concat", "Split", "Gather", "GatherElements", "GatherND", "Where", "Pad", "DepthToSpace",
    "SpaceToDepth", "Max", "Min", "Clip", "Relu", "Abs", "Neg", "MaxPool", "GlobalMaxPool",
})  # not the reductions or average pools: over nothing they are ±inf or 0 / 0
#: ops whose outputs lie in [-1, 1] for any NaN-free input (not Softmax: exp(inf - inf))
_UNIT = frozenset({"Sigmoid", "Tanh", "Erf", "HardSigmoid", "Sign"})
#: headroom for rounding in the bounds' float arithmetic
_MARGIN = 1.01


def _dtype(value: ir.Value) -> np.dtype | None:
    try:
        return None if value.dtype is None else np.dtype(value.dtype.numpy())
    except (TypeError, ValueError, NotImplementedError):
        return None


def _bound(value: ir.Value | None, memo: dict[int, float | None], depth: int) -> float | None:
    """A finite bound on ``|value|`` that holds whatever the graph's inputs are, else None."""
    if value is None:
        return 0.0
    dtype = _dtype(value)
    if dtype is None:
        return None
    if dtype.kind == "b":
        return 1.0
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return float(max(-int(info.min), int(info.max)))
    if dtype.kind != "f":
        return None
    key = id(value)
    if key not in memo:
        memo[key] = None
        bound = _bound_of(value, memo, depth)
        if bound is not None and not bound * _MARGIN < float(np.finfo(dtype).max):
            bound = None  # may overflow to inf
        memo[key] = bound
    return memo[key]


def _bound_of(value: ir.Value, memo: dict[int, float | None], depth: int) -> float | None:
    array = _constant_values(value)
    if array is not None:
        return float(np.max(np.abs(array), initial=0.0)) if np.isfinite(array).all() else None
    node = value.producer()
    if node is None or node.domain not in ("", "ai.onnx") or depth >= _MAX_DEPTH:
        return None
    op = node.op_type

    def of(v: ir.Value | None) -> float | None:
        return _bound(v, memo, depth + 1)

    if op == "Cast":
        return of(node.inputs[0])
    if op in _WITHIN_INPUTS:
        floats = [v for v in node.inputs if v is not None and (_dtype(v) is None or _dtype(v).kind == "f")]
        bounds = [of(v) for v in floats]
        return None if any(b is None for b in bounds) else max(bounds, default=0.0)
    if op in ("Floor", "Ceil", "Round"):
        b = of(node.inputs[0])
        return None if b is None else b + 1.0
    if op in _UNIT:
        return 1.0 if of(node.inputs[0]) is not None or is_nan_free(node.inputs[0]) else None
    if op == "Softmax":
        return 1.0 if of(node.inputs[0]) is not None else None
    if op in ("Add", "Sub", "Mul", "Sum"):
        bounds = [of(v) for v in node.inputs]
        if any(b is None for b in bounds):
            return None
        return float(np.prod(bounds)) if op == "Mul" else float(sum(bounds))
    if op == "Div":
        num, divisor = of(node.inputs[0]), _constant_values(node.inputs[1])
        if num is None or divisor is None or not np.isfinite(divisor).all() or (divisor == 0).any():
            return None
        return num / float(np.min(np.abs(divisor)))
    if op == "If":
        pooled = guarded_input(node)  # a max pool's NaN guard: the pool of a bounded input
        return None if pooled is None else of(pooled)
    if op in ("Conv", "MatMul", "Gemm"):
        return _linear_bound(node, of)
    if op == "BatchNormalization" and len(node.outputs) == 1:
        return _batch_norm_bound(node, of)
    return None


def _linear_bound(node: ir.Node, of: Any) -> float | None:
    """Conv / MatMul / Gemm whose weight is a constant: each output is a weighted sum of inputs, so
    its bound is the input's times the largest sum of |weights| feeding one output, plus the bias's."""
    x = of(node.inputs[0])
    w = _constant_values(node.inputs[1]) if len(node.inputs) > 1 else None
    if x is None or w is None or w.ndim < 2 or not np.isfinite(w).all():
        return None
    w = np.abs(w.astype(np.float64))
    attrs = {k: a.value for k, a in node.attributes.items()}
    if node.op_type == "Conv":  # (out channels, in channels / group, *kernel)
        per_output = w.reshape(w.shape[0], -1).sum(axis=1)
    elif node.op_type == "MatMul":  # (..., K, N): sum over K
        per_output = w.sum(axis=-2)
    else:  # Gemm: op(B) is (K, N); transA only reorders A's bounded entries
        per_output = (w.sum(axis=1) if attrs.get("transB", 0) else w.sum(axis=0)) * abs(float(attrs.get("alpha", 1.0)))
    bias = of(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] is not None else 0.0
    if bias is None:
        return None
    if node.op_type == "Gemm":
        bias *= abs(float(attrs.get("beta", 1.0)))
    return x * float(np.max(per_output, initial=0.0)) + bias


def _batch_norm_bound(node: ir.Node, of: Any) -> float | None:
    """Inference BatchNormalization with constant parameters: scale · (x - mean) / sqrt(var + eps) + B."""
    x = of(node.inputs[0])
    params = [_constant_values(v) for v in node.inputs[1:5]]
    if x is None or len(params) != 4 or any(p is None or not np.isfinite(p).all() for p in params):
        return None
    scale, shift, mean = (np.abs(p.astype(np.float64)).reshape(-1) for p in params[:3])
    var = params[3].astype(np.float64).reshape(-1)
    eps = float(node.attributes["epsilon"].value) if "epsilon" in node.attributes else 1e-5
    if not (var + eps > 0).all():
        return None
    return float(np.max(scale * (x + mean) / np.sqrt(var + eps) + shift, initial=0.0))


def guarded_input(node: ir.Node) -> ir.Value | None:
    """``x`` of a max pool's NaN guard ``If(IsNaN(ReduceSum(x)))`` (stamped by its lowering)."""
    if node.op_type != "If" or node.metadata_props.get(NAN_GUARD_KEY) != "max_pool" or not node.inputs:
        return None
    isnan = node.inputs[0].producer() if node.inputs[0] is not None else None
    total = isnan.inputs[0].producer() if isnan is not None and isnan.op_type == "IsNaN" else None
    if total is None or total.op_type != "ReduceSum" or len(total.inputs) != 1:
        return None
    return total.inputs[0]


def bound_given(value: ir.Value, limits: dict[ir.Value, float]) -> float | None:
    """A finite bound on ``|value|`` that holds whenever each value in ``limits`` (graph inputs) is
    at most its limit in magnitude, else None: what lets one check of a model's inputs stand for
    the NaN checks of values computed from them (:mod:`jax2onnx.passes.nan_guard_hoist`)."""
    return _bound(value, {id(v): float(limit) for v, limit in limits.items()}, 0)


__all__ = ["NAN_GUARD_KEY", "bound_given", "guarded_input", "is_nan_free"]

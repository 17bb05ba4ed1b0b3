"""Legalization rules for opsets 13 to 16: the op forms and element types ONNX added at 14, 15 and
16 (and LayerNormalization at 17), rewritten into what opset 13 already has.

Registered into :mod:`jax2onnx.ir.legalize`'s rule table when it is imported (by the builder, beside
legalize), so every default-domain node passes through these rules like the others. What changed
between 13 and 17 for the ops the packs emit, and what each rule does:

- element types: Add/Sub/Mul/Div took int8/int16/uint8/uint16 at 14, Relu integers at 14, CumSum
  float16/bfloat16 at 14, Pow a bfloat16 exponent at 15, Where, LessOrEqual, GreaterOrEqual,
  LeakyRelu and PRelu bfloat16 at 16. The op runs on a wider carrier (int32, float32) that holds
  every value of the type exactly, and the result is cast back: integer sums, differences and
  products wrap in the cast as in the narrow type; a comparison or selection is unchanged; a float
  result is the carrier's rounded once to the narrow type (what XLA's CPU backend computes too).
  If/Loop/Scan carry bfloat16 from 16: declined.
- ``Shape(start, end)`` is 15: before, ``Shape`` then ``Slice``.
- ``Reshape(allowzero=1)`` is 14: before, a 0 in the target copies the input's dim. A constant
  target's 0 becomes the one ``-1`` (the other 0s then come from a ``Slice`` to length 0, the
  tensor being empty); a run-time target gets ``Where(s == 0, -1, s)``, exact unless two or more of its dims are
  0 at run time (onnxruntime then rejects the two ``-1``: an error, never a wrong result).
- ``HardSwish`` is 14: ``x * HardSigmoid(x, 1/6, 1/2)``, the op's definition.
- ``BatchNormalization``'s ``training_mode`` is 14: inference (the only form the packs emit) is
  BatchNormalization-9 without the attribute; training mode is declined.
- ``ScatterND``/``ScatterElements`` ``reduction="add"/"mul"`` is 16: before, a ``Loop`` applies
  the updates one at a time in their order (GatherND, Add/Mul, plain ScatterND), which is the
  order onnxruntime and XLA's CPU backend sum in, so repeated indices give the same bits.
  ScatterElements is first turned into ScatterND indices (its rank must be known).
- ``LayerNormalization`` is 17: the op's own definition, ReduceMean of x, of (x - mean)², then
  ``(x - mean) * Reciprocal(Sqrt(var + eps)) * scale + bias``, computed in float32 for 16-bit
  inputs (``stash_type=1``) and in the input's type for float and double (as onnxruntime's kernels).
- ``DFT`` is 17: before, the transform as two Einsums with the cos/sin matrices of the signal
  length (read from ``Shape``, so symbolic lengths work), ``onesided`` keeping the first n//2+1
  rows; a ``dft_length`` input is declined. ``STFT`` and the window ops (17) have no rule: their
  export declines.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from . import constants
from .legalize import OpUnavailableError, Rewritten, _dtype, _i64, _rule, _scatter
from .legalize import _dft as _legalize_dft_axis

_INT64_MAX = np.iinfo(np.int64).max

#: A type an op lacks below some opset -> the carrier that holds each of its values exactly.
_CARRIERS = {
    ir.DataType.INT8: ir.DataType.INT32,
    ir.DataType.INT16: ir.DataType.INT32,
    ir.DataType.UINT8: ir.DataType.INT32,
    ir.DataType.UINT16: ir.DataType.INT32,
    ir.DataType.FLOAT16: ir.DataType.FLOAT,
    ir.DataType.BFLOAT16: ir.DataType.FLOAT,
}

#: Ops whose type constraints grew between 13 and 17 and whose result on a carrier, cast back, is
#: the result on the narrow type (opset when the type arrived: see the module doc).
_WIDENED = ("Add", "Sub", "Mul", "Div", "CumSum", "Pow", "Where", "LessOrEqual", "GreaterOrEqual", "LeakyRelu", "PRelu")


@functools.cache
def _signature(op_type: str, opset: int) -> tuple[dict[str, frozenset[str]], list[str], list[str]]:
    """The op's schema at ``opset``: allowed types per type parameter, the type parameter of each
    formal input and of each formal output."""
    schema = onnx.defs.get_schema(op_type, opset, "")
    allowed = {c.type_param_str: frozenset(c.allowed_type_strs) for c in schema.type_constraints}
    return allowed, [f.type_str for f in schema.inputs], [f.type_str for f in schema.outputs]


def _type_str(dtype: ir.DataType) -> str:
    return f"tensor({onnx.helper.tensor_dtype_to_string(int(dtype)).removeprefix('TensorProto.').lower()})"


@_rule(*_WIDENED)
def _widen(op, op_type, inputs, attrs, n_out, opset):
    """Cast the operands of a type the opset's schema lacks to their carrier; cast results back."""
    if opset >= 17:
        return inputs, attrs
    allowed, formal_in, formal_out = _signature(op_type, opset)
    params = [formal_in[min(i, len(formal_in) - 1)] for i in range(len(inputs))]
    narrow: dict[str, ir.DataType] = {}
    for x, p in zip(inputs, params):
        dtype = _dtype(x)
        if dtype is not None and p in allowed and _type_str(dtype) not in allowed[p]:
            carrier = _CARRIERS.get(dtype)
            if carrier is None or _type_str(carrier) not in allowed[p]:
                raise OpUnavailableError(f"{op_type} of {dtype.name.lower()}", 17, opset, "no exact carrier type at this opset")
            narrow[p] = dtype
    if not narrow:
        return inputs, attrs
    wide = [_to_carrier(op, x, narrow[p]) if p in narrow else x for x, p in zip(inputs, params)]
    out = getattr(op, op_type)(*wide, _outputs=n_out, **attrs)
    outs = list(out) if n_out > 1 else [out]
    for i, param in enumerate(formal_out[:n_out]):
        if param in narrow:
            outs[i] = op.Cast(outs[i], to=int(narrow[param]))
    return Rewritten(tuple(outs) if n_out > 1 else outs[0])


def _to_carrier(op: Any, x: Any, dtype: ir.DataType) -> Any:
    """``x`` (a value or a literal of the narrow ``dtype``) on ``dtype``'s carrier; a Python number
    is left to take the carrier from the other operands."""
    carrier = _CARRIERS[dtype]
    if isinstance(x, ir.Value):
        return op.Cast(x, to=int(carrier))
    if isinstance(x, (np.ndarray, np.generic)):  # a typed literal keeps its dtype in the builder
        return np.asarray(x).astype(carrier.numpy())
    return x


@_rule("Relu")
def _relu(op, op_type, inputs, attrs, n_out, opset):
    """Integer Relu is 14: before, ``Max(x, 0)`` (exact for every integer type)."""
    dtype = _dtype(inputs[0])
    if opset >= 14 or dtype is None or dtype.numpy().kind not in "iu":
        return inputs, attrs
    return Rewritten(op.Max(inputs[0], np.zeros((), dtype=dtype.numpy())))


@_rule("If", "Loop", "Scan")
def _control_flow(op, op_type, inputs, attrs, n_out, opset):
    """bfloat16 values in If/Loop/Scan are 16: declined before (a body's types are its own)."""
    if opset >= 16:
        return inputs, attrs
    dtypes = {_dtype(x) for x in inputs}
    for value in attrs.values():
        graph = value.value if isinstance(value, ir.Attr) else value
        if isinstance(graph, ir.Graph):
            dtypes |= {_dtype(v) for v in (*graph.inputs, *graph.outputs)}
    if ir.DataType.BFLOAT16 in dtypes:
        raise OpUnavailableError(f"{op_type} with bfloat16 values", 16, opset)
    return inputs, attrs


@_rule("Shape")
def _shape(op, op_type, inputs, attrs, n_out, opset):
    """``start``/``end`` are 15: before, the whole shape sliced."""
    if opset >= 15:
        return inputs, attrs
    start, end = attrs.pop("start", None), attrs.pop("end", None)
    if not start and end is None:
        return inputs, attrs
    full = op.Shape(inputs[0])
    ends = _INT64_MAX if end is None else int(end)
    return Rewritten(op.Slice(full, np.asarray([start or 0], np.int64), np.asarray([ends], np.int64),
                              np.asarray([0], np.int64)))


@_rule("Reshape")
def _reshape(op, op_type, inputs, attrs, n_out, opset):
    """``allowzero`` is 14; see the module doc for the forms that keep a 0 in the target a 0."""
    if opset >= 14:
        return inputs, attrs
    if not attrs.pop("allowzero", None):
        return inputs, attrs
    x, target = inputs[0], inputs[1]
    dims = constants.constant_ints(target)
    if dims is not None:
        zeros = [i for i, d in enumerate(dims) if d == 0]
        if not zeros:
            return inputs, attrs
        # the tensor is empty: the first 0 is inferred (-1), the others are 1s sliced to length 0
        first = [-1 if i == zeros[0] else (1 if d == 0 else d) for i, d in enumerate(dims)]
        if len(zeros) == 1:
            return [x, np.asarray(first, np.int64)], attrs
        rest = np.asarray(zeros[1:], np.int64)
        empty = np.zeros(len(rest), np.int64)
        return Rewritten(op.Slice(op.Reshape(x, np.asarray(first, np.int64)), empty, empty, rest))
    s = _i64(op, target)
    return [x, op.Where(op.Equal(s, np.int64(0)), np.int64(-1), s)], attrs


@_rule("HardSwish")
def _hard_swish(op, op_type, inputs, attrs, n_out, opset):
    if opset >= 14:
        return inputs, attrs
    x = inputs[0]
    return Rewritten(op.Mul(x, op.HardSigmoid(x, alpha=1.0 / 6.0, beta=0.5)))


@_rule("BatchNormalization")
def _batch_norm(op, op_type, inputs, attrs, n_out, opset):
    if opset >= 15:
        return inputs, attrs
    if attrs.get("training_mode") or n_out > 1:
        raise OpUnavailableError("BatchNormalization(training_mode=1)", 14, opset)
    attrs.pop("training_mode", None)
    if any(_dtype(x) == ir.DataType.BFLOAT16 for x in inputs):
        raise OpUnavailableError("BatchNormalization of bfloat16", 15, opset)
    return inputs, attrs


# --------------------------------------------------------------------------------------------
# DFT (17) as Einsums with the transform's cos/sin matrices


@_rule("DFT")
def _dft_matrix(op, op_type, inputs, attrs, n_out, opset):
    """``Y[k] = sum_j x[j] exp(∓2πi jk/n)`` along ``axis`` (the signal's last-but-pair axis or any
    other; the rank need not be known: the axes before it are named, those after it are ``...``).
    The angle is taken from ``jk mod n`` (exact int64) in double and the matrices cast to the
    data's type, so the only rounding is the sums'; ``inverse`` flips the sign and divides by n."""
    if opset >= 17:
        return _legalize_dft_axis(op, op_type, inputs, attrs, n_out, opset)
    x = inputs[0]
    dtype = _dtype(x)
    if len(inputs) > 1 and inputs[1] is not None:
        raise OpUnavailableError("DFT with dft_length", 17, opset)
    axis = constants.constant_ints(inputs[2])[0] if len(inputs) > 2 and inputs[2] is not None else int(attrs.get("axis", 1))
    if axis < 0 or dtype not in (ir.DataType.FLOAT, ir.DataType.DOUBLE) or axis > 20:
        raise OpUnavailableError(op_type, 17, opset, "a decomposition needs a float/double signal on a non-negative axis")
    onesided, inverse = int(attrs.get("onesided", 0)), int(attrs.get("inverse", 0))
    n = op.Shape(x, start=axis, end=axis + 1)  # [n]
    n_rows = op.Add(op.Div(n, np.int64(2)), np.int64(1)) if onesided else n
    j = op.Range(np.int64(0), op.Squeeze(n, np.asarray([0], np.int64)), np.int64(1))
    k = op.Range(np.int64(0), op.Squeeze(n_rows, np.asarray([0], np.int64)), np.int64(1))
    jk = op.Mod(op.Mul(op.Unsqueeze(k, np.asarray([1], np.int64)), op.Unsqueeze(j, np.asarray([0], np.int64))), n)
    theta = op.Div(op.Mul(op.Cast(jk, to=int(ir.DataType.DOUBLE)), np.float64(2 * np.pi)),
                   op.Cast(n, to=int(ir.DataType.DOUBLE)))
    cos = op.Cos(theta)
    sin = op.Sin(theta) if inverse else op.Neg(op.Sin(theta))  # exp(∓iθ) = cos θ ∓ i sin θ
    if inverse:
        scale = op.Cast(n, to=int(ir.DataType.DOUBLE))
        cos, sin = op.Div(cos, scale), op.Div(sin, scale)
    cos, sin = (op.Cast(m, to=int(dtype)) for m in (cos, sin))
    lead = "abcdefghilmnopqrstuvwxyz"[:axis]
    equation = f"{lead}j...,kj->{lead}k..."
    re = op.Gather(x, np.asarray(0, np.int64), axis=-1)
    # the imaginary part: x's second component, or the appended zeros for a real (…, 1) signal
    im = op.Gather(op.Concat(x, op.Mul(x, np.zeros((), dtype.numpy())), axis=-1), np.asarray(1, np.int64), axis=-1)
    # (re + i im)(cos + i sin) = (re cos - im sin) + i (re sin + im cos); a real signal has im = 0
    y_re = op.Sub(op.Einsum(re, cos, equation=equation), op.Einsum(im, sin, equation=equation))
    y_im = op.Add(op.Einsum(re, sin, equation=equation), op.Einsum(im, cos, equation=equation))
    last = np.asarray([-1], np.int64)
    return Rewritten(op.Concat(op.Unsqueeze(y_re, last), op.Unsqueeze(y_im, last), axis=-1))


# --------------------------------------------------------------------------------------------
# LayerNormalization (17)


@_rule("LayerNormalization")
def _layer_norm(op, op_type, inputs, attrs, n_out, opset):
    if opset >= 17:
        return inputs, attrs
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    dtype = _dtype(x)
    if dtype is None:
        raise OpUnavailableError(op_type, 17, opset, "the input's dtype is unknown, so no exact decomposition applies")
    axis = int(attrs.get("axis", -1))
    eps = float(np.float32(attrs.get("epsilon", 1e-5)))  # an ONNX float attribute: float32's value
    half = dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
    compute = ir.DataType.FLOAT if half and int(attrs.get("stash_type", 1)) == 1 else dtype
    rank = constants.rank(x)
    flatten = rank is None and axis >= 0
    if rank is not None:
        axes = list(range(axis % rank, rank))
    elif axis < 0:
        axes = list(range(axis, 0))
    else:  # a non-negative axis of a value whose rank is unknown: normalize one flattened trailing axis
        axes = [-1]
    if flatten and n_out > 1:
        raise OpUnavailableError(op_type, 17, opset, "its Mean/InvStdDev outputs of a value of unknown rank")
    xc = x if compute == dtype else op.Cast(x, to=int(compute))
    if flatten:
        xc = op.Reshape(xc, op.Concat(op.Shape(x, start=0, end=axis), np.asarray([-1], np.int64), axis=0))
        scale = op.Reshape(scale, np.asarray([-1], np.int64))
        bias = None if bias is None else op.Reshape(bias, np.asarray([-1], np.int64))
    axes_v = np.asarray(axes, np.int64)
    mean = op.ReduceMean(xc, axes_v, keepdims=1)
    d = op.Sub(xc, mean)
    var = op.ReduceMean(op.Mul(d, d), axes_v, keepdims=1)
    inv_std = op.Reciprocal(op.Sqrt(op.Add(var, eps)))
    y = op.Mul(d, inv_std)
    if compute != dtype:
        y = op.Cast(y, to=int(dtype))
    y = op.Mul(y, scale)
    if bias is not None:
        y = op.Add(y, bias)
    if flatten:
        y = op.Reshape(y, op.Shape(x))
    return Rewritten((y, mean, inv_std)[:n_out] if n_out > 1 else y)


# --------------------------------------------------------------------------------------------
# ScatterND / ScatterElements with reduction add/mul (16): one update at a time in a Loop


@_rule("ScatterND", "ScatterElements")
def _scatter_reduction(op, op_type, inputs, attrs, n_out, opset):
    reduction = attrs.get("reduction")
    if opset >= 16 or reduction not in ("add", "mul", "none"):
        return _scatter(op, op_type, inputs, attrs, n_out, opset)
    attrs.pop("reduction")
    if reduction == "none":
        return inputs, attrs
    data, indices, updates = inputs
    if op_type == "ScatterElements":
        indices = _elements_to_nd(op, indices, int(attrs.pop("axis", 0)), reduction, opset)
    return Rewritten(_sequential_scatter(op, data, indices, updates, reduction, opset))


def _elements_to_nd(op: Any, indices: Any, axis: int, reduction: str, opset: int) -> ir.Value:
    """ScatterElements' indices (shape S, values along ``axis``) as ScatterND's (S + [rank]): the
    position of each element, with its index in place of its coordinate along ``axis``."""
    rank = _knownrank(indices)
    if rank is None:
        raise OpUnavailableError(f"ScatterElements(reduction={reduction!r})", 16, opset,
                                 "the indices' rank is unknown, so they cannot be turned into ScatterND's")
    idx = _i64(op, indices)
    shape = op.Shape(idx)
    coords = []
    for d in range(rank):
        if d == axis % rank:
            coords.append(op.Unsqueeze(idx, np.asarray([-1], np.int64)))
            continue
        n = op.Squeeze(op.Shape(idx, start=d, end=d + 1), np.asarray([0], np.int64))
        iota = op.Range(np.int64(0), n, np.int64(1))
        along = [1] * rank
        along[d] = -1
        iota = op.Reshape(iota, np.asarray(along, np.int64))
        coords.append(op.Unsqueeze(op.Expand(iota, shape), np.asarray([-1], np.int64)))
    return coords[0] if rank == 1 else op.Concat(*coords, axis=-1)


def _knownrank(v: Any) -> int | None:
    """``v``'s rank: from its shape, or (a value made inside a lowering has none) from the
    constant target of the Reshape that made it."""
    rank = constants.rank(v)
    if rank is not None or not isinstance(v, ir.Value):
        return rank
    node = v.producer()
    if node is not None and node.op_type == "Reshape" and len(node.inputs) > 1:
        target = constants.constant_ints(node.inputs[1])
        return None if target is None else len(target)
    return None


def _sequential_scatter(op: Any, data: Any, indices: Any, updates: Any, reduction: str, opset: int) -> ir.Value:
    """``ScatterND(data, indices, updates, reduction)`` as a Loop over the index rows in order:
    ``data[i] = data[i] (+|*) update`` one row at a time (exact for repeated indices, in the order
    the reduction is defined in). The loop carries the data as a matrix (indexed positions × slice
    elements), so its body is typed whatever the data's rank (a value made inside a lowering has
    none here)."""
    dtype = _dtype(data)
    if dtype is None:
        raise OpUnavailableError(f"ScatterND(reduction={reduction!r})", 16, opset, "the data's dtype is unknown")
    idx = _i64(op, indices)
    shape = op.Shape(data)
    depth = op.Shape(idx, start=-1)  # [q]
    rows = op.Reshape(idx, op.Concat(np.asarray([-1], np.int64), depth, axis=0))  # (k, q)
    lead = op.Slice(shape, np.asarray([0], np.int64), depth)  # the indexed dims
    n_lead = op.ReduceProd(lead, keepdims=1)
    n_tail = op.ReduceProd(op.Slice(shape, depth, np.asarray([_INT64_MAX], np.int64)), keepdims=1)
    # each row's flat position among the indexed dims (GatherND resolves negative indices)
    positions = op.Reshape(op.Range(np.int64(0), op.Squeeze(n_lead, np.asarray([0], np.int64)), np.int64(1)), lead,
                           allowzero=1)
    flat_rows = op.GatherND(positions, rows)  # (k,)
    matrix = op.Reshape(data, op.Concat(n_lead, n_tail, axis=0), allowzero=1)
    upd_rows = op.Reshape(updates, op.Concat(op.Shape(rows, start=0, end=1), n_tail, axis=0), allowzero=1)
    trips = op.Squeeze(op.Shape(rows, start=0, end=1), np.asarray([0], np.int64))

    scope = op._scope
    # the body is a scope of the emitting scope's class (the builder imports these rules, so this
    # module does not import the builder)
    body = type(scope)(scope.model, kind="subgraph", parent=scope)
    i = _body_input(body, "scatter_i", ir.DataType.INT64, [])
    cond = _body_input(body, "scatter_cond", ir.DataType.BOOL, [])
    acc = _body_input(body, "scatter_acc", dtype, [None, None])
    b = body.op
    where = b.Reshape(b.Gather(flat_rows, i, axis=0), np.asarray([1, 1], np.int64))
    update = b.Unsqueeze(b.Gather(upd_rows, i, axis=0), np.asarray([0], np.int64))  # (1, slice)
    combine = b.Add if reduction == "add" else b.Mul
    written = b.ScatterND(acc, where, combine(b.GatherND(acc, where), update))
    written.shape = ir.Shape([None, None])
    cond_out = b.Identity(cond)
    cond_out.shape = ir.Shape([])
    graph = ir.Graph(body.inputs, [cond_out, written], nodes=body.nodes, name=scope.fresh("scatter_body"),
                     opset_imports={"": opset})
    out = op.Loop(trips, None, matrix, body=graph)
    out.type = ir.TensorType(dtype)
    return op.Reshape(out, shape, allowzero=1)


def _body_input(body: Any, name: str, dtype: ir.DataType, dims: list[Any]) -> ir.Value:
    v = body.new_value(name)
    v.type, v.shape = ir.TensorType(dtype), ir.Shape(dims)
    body.inputs.append(v)
    return v

"""Opset legalization: lowerings write the newest form of an op, and :func:`legalize` turns each
node into what the export's opset can express.

Every emitted default-domain node passes through here before it is built. A rule may

- rewrite the node's inputs/attributes into the opset's form (ReduceMean's axes as an attribute
  before 18, Split's sizes before 18, Pad's ``axes`` folded into full pads, ...), or
- replace the node by several nodes emitted through the op builder it is handed, whose outputs
  stand for the node's (BitwiseAnd before 18 as bit-plane arithmetic, ScatterND min/max before 18
  as a sort and a plain scatter, dilated AveragePool before 19 as a Conv, bool ReduceMax before 20
  on a uint8 view), or
- decline: :class:`OpUnavailableError` names the op and the opset that has it. Inside a fused
  region core then lowers the library's own body instead; elsewhere the export fails with it.

The nodes a rule emits go through :func:`legalize` again, so a decomposition may use any op that
is itself legal (or legalized) at the opset. Every decomposition here is exact: it gives the same
bits as the op it replaces (float results up to the summation order of a Conv for AveragePool).
docs/opsets.md lists what is decomposed and what is declined.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx_ir as ir

from . import constants
from .opsets import op_since
from .proto_walk import nodes

I64 = int(ir.DataType.INT64)
U64 = int(ir.DataType.UINT64)


class OpUnavailableError(Exception):
    """The ONNX op a lowering emits does not exist (with this meaning) at the export's opset, and
    no exact decomposition of it is known."""

    def __init__(self, op_type: str, since: int, opset: int, why: str = ""):
        self.op_type, self.since, self.opset = op_type, since, opset
        super().__init__(
            f"ONNX op {op_type} exists from opset {since}; this export targets opset {opset} "
            f"(pass opset={since} or higher to to_onnx){': ' + why if why else ''}"
        )


#: The doc string of the nodes that replace an op at an opset without it (``DECOMPOSED +
#: op_type``): a reader of the model (the testcase runner's structure checks) learns from it which
#: ops of the newest form were decomposed. :func:`decomposed_ops` reads them back.
DECOMPOSED = "jax2onnx: decomposition of "


def decomposed_ops(model: Any) -> set[str]:
    """The op types a ``onnx.ModelProto`` had decomposed by :func:`legalize` (any graph, function)."""

    return {n.doc_string[len(DECOMPOSED) :] for n in nodes(model) if n.doc_string.startswith(DECOMPOSED)}


@dataclass
class Rewritten:
    """A node replaced by several: ``outputs`` (one value, or a tuple for several) stands for it."""

    outputs: Any


#: A rule: (op builder, op type, inputs, attributes, number of outputs, opset) -> the node's legal
#: (inputs, attributes), or :class:`Rewritten` when it emitted a replacement itself.
Rule = Callable[[Any, str, list[Any], dict[str, Any], int, int], "tuple[list[Any], dict[str, Any]] | Rewritten"]
_RULES: dict[str, Rule] = {}


def _rule(*op_types: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for t in op_types:
            _RULES[t] = fn
        return fn

    return register


def has_rule(op_type: str) -> bool:
    """Whether a rule forms ``op_type`` at opsets older than the op (HardSwish before 14)."""
    return op_type in _RULES


def legalize(
    op: Any, op_type: str, inputs: list[Any], attrs: dict[str, Any], n_out: int, opset: int, schema: Any
) -> tuple[list[Any], dict[str, Any]] | Rewritten:
    """``op_type(inputs, attrs)`` in its newest form → its form at ``opset``, or the nodes that
    replace it (already emitted through ``op``, an :class:`~jax2onnx.ir.builder.OpBuilder`)."""
    rule = _RULES.get(op_type)
    if rule is not None:
        nodes = op._scope.nodes
        first = len(nodes)
        out = rule(op, op_type, inputs, attrs, n_out, opset)
        if isinstance(out, Rewritten):
            for node in nodes[first:]:  # innermost decomposition first: its nodes keep its mark
                node.doc_string = node.doc_string or DECOMPOSED + op_type
            return out
        inputs, attrs = out
    _check_available(op_type, schema, opset)
    return inputs, attrs


def _check_available(op_type: str, schema: Any, opset: int) -> None:
    since = op_since(op_type)
    if since is None:
        return  # not a standard op (a function of the default domain is the caller's business)
    if schema is None or opset < since:
        raise OpUnavailableError(op_type, since, opset)


# --------------------------------------------------------------------------------------------
# helpers


def _dtype(v: Any) -> ir.DataType | None:
    return v.type.dtype if isinstance(v, ir.Value) and v.type is not None else None


def _as_value(op: Any, x: Any, dtype: ir.DataType) -> ir.Value:
    """``x`` as a value of ``dtype``: a value is cast (no node when it has it), a literal becomes a
    constant, which must hold it exactly."""
    if isinstance(x, ir.Value):
        return x if _dtype(x) == dtype else op.Cast(x, to=int(dtype))
    arr = np.asarray(x, dtype=dtype.numpy())
    if not np.array_equal(arr, np.asarray(x)):
        raise TypeError(f"the literal {x!r} is not exactly representable as {dtype.name}")
    return op._scope.const(arr)


def _i64(op: Any, x: Any) -> ir.Value:
    return _as_value(op, x, ir.DataType.INT64)


# --------------------------------------------------------------------------------------------
# single-node forms

#: Reductions that took ``axes`` as an attribute before opset 18 (ReduceSum switched at 13).
_REDUCE_AXES_INPUT_SINCE_18 = (
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSum",
    "ReduceLogSumExp",
    "ReduceSumSquare",
)


@_rule(*_REDUCE_AXES_INPUT_SINCE_18)
def _reduce(op, op_type, inputs, attrs, n_out, opset):
    if op_type in ("ReduceMax", "ReduceMin") and opset < 20 and _dtype(inputs[0]) == ir.DataType.BOOL:
        # bool ReduceMax/Min are opset 20; before, reduce a uint8 view (exact: 0/1) and cast back
        reduce = getattr(op, op_type)
        wide = reduce(op.Cast(inputs[0], to=int(ir.DataType.UINT8)), *inputs[1:], **attrs)
        return Rewritten(op.Cast(wide, to=int(ir.DataType.BOOL)))
    if opset < 18 and len(inputs) > 1:
        axes = constants.constant_ints(inputs[1])
        if axes is None and inputs[1] is not None:
            raise OpUnavailableError(f"{op_type} with runtime axes", 18, opset)
        inputs = inputs[:1]
        if axes is not None and (axes or not attrs.get("noop_with_empty_axes")):
            attrs["axes"] = axes
        attrs.pop("noop_with_empty_axes", None)
    return inputs, attrs


@_rule("DFT")
def _dft(op, op_type, inputs, attrs, n_out, opset):
    if opset < 20 and len(inputs) > 2:
        axis = constants.constant_ints(inputs[2])
        if axis is None:
            raise OpUnavailableError("DFT with a runtime axis", 20, opset)
        attrs["axis"] = axis[0]
        inputs = inputs[:2]
    return inputs, attrs


@_rule("Split")
def _split(op, op_type, inputs, attrs, n_out, opset):
    """``num_outputs`` is opset 18: before, the sizes as an input, ceil(dim/n) each with the last
    ones smaller (opset 18's rule) — constants for a static dim, else computed from Shape."""
    if opset >= 18 or "num_outputs" not in attrs:
        return inputs, attrs
    n = int(attrs.pop("num_outputs"))
    x = inputs[0]
    axis = int(attrs.get("axis", 0))
    dim = x.shape[axis] if isinstance(x, ir.Value) and x.shape is not None else None
    if isinstance(dim, int):
        chunk = -(-dim // n)
        sizes = [max(0, min(chunk, dim - i * chunk)) for i in range(n)]
        return [x, np.asarray(sizes, dtype=np.int64)], attrs
    # a symbolic dim, or a value made inside a lowering (the builder types values by dtype only)
    d = op.Shape(x, start=axis, end=None if axis == -1 else axis + 1)
    chunk = op.Div(op.Add(d, np.int64(n - 1)), np.int64(n))
    rest = op.Sub(d, op.Mul(chunk, np.arange(n, dtype=np.int64)))
    return [x, op.Min(chunk, op.Max(rest, np.int64(0)))], attrs


@_rule("Pad")
def _pad(op, op_type, inputs, attrs, n_out, opset):
    """Pad's ``axes`` input is opset 18: before, full ``pads`` (begin of every axis, then end).
    A value made inside a lowering has no shape here (the builder types values by dtype only), so
    the rank may be unknown: then the full pads are scattered into zeros of length 2·rank computed
    from Shape(Shape(x))."""
    if opset >= 18 or len(inputs) <= 3 or inputs[3] is None:
        return inputs, attrs
    x, pads, value, axes = inputs[0], inputs[1], inputs[2], inputs[3]
    axes_c, pads_c, rank = constants.constant_ints(axes), constants.constant_ints(pads), constants.rank(x)
    if axes_c is not None and pads_c is not None and rank is not None:
        full = [0] * (2 * rank)
        for i, a in enumerate(axes_c):
            a %= rank
            full[a], full[rank + a] = pads_c[i], pads_c[len(axes_c) + i]
        return [x, np.asarray(full, dtype=np.int64), value], attrs
    rank_t = op.Shape(op.Shape(x))  # [rank]
    norm = op.Mod(_i64(op, axes), rank_t)  # Mod takes the divisor's sign: negative axes count from the end
    where = op.Concat(norm, op.Add(norm, rank_t), axis=0)
    zeros = op.ConstantOfShape(op.Mul(rank_t, np.int64(2)), value=np.zeros(1, np.int64))
    full = op.ScatterElements(zeros, where, _i64(op, pads), axis=0)
    return [x, full, value], attrs


# --------------------------------------------------------------------------------------------
# bitwise ops (opset 18) as bit planes


def _literal_dtype(inputs: list[Any]) -> ir.DataType | None:
    return next((_dtype(x) for x in inputs if _dtype(x) is not None), None)


@_rule("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot")
def _bitwise(op, op_type, inputs, attrs, n_out, opset):
    """Before opset 18, exact for every integer dtype: NOT as ``-1 - x`` (signed) or ``max - x``
    (unsigned); AND/OR/XOR split each operand into its bits (uint64 view, BitShift and Mod 2 along a
    new last axis), combine the bits arithmetically (a·b, a+b-a·b, (a+b) mod 2) and sum them back with weights 2^i
    (see :func:`_from_bit_planes`): no step rounds or overflows, so two's complement bits come out
    as they went in."""
    if opset >= 18:
        return inputs, attrs
    dtype = _literal_dtype(inputs)
    if dtype is None:
        raise OpUnavailableError(
            op_type, 18, opset, "the operands' dtype is unknown, so no exact decomposition applies"
        )
    if dtype == ir.DataType.BOOL:  # not an ONNX bitwise type, but the logic op is the same
        logic = {"BitwiseAnd": "And", "BitwiseOr": "Or", "BitwiseXor": "Xor", "BitwiseNot": "Not"}[op_type]
        return Rewritten(getattr(op, logic)(*inputs))
    npt = dtype.numpy()
    if npt.kind not in "iu":
        raise OpUnavailableError(op_type, 18, opset, f"{dtype.name} is not an integer type")
    xs = [_as_value(op, x, dtype) for x in inputs]
    if op_type == "BitwiseNot":
        top = -1 if npt.kind == "i" else int(np.iinfo(npt).max)
        return Rewritten(op.Sub(np.asarray(top, dtype=npt), xs[0]))
    width = npt.itemsize * 8
    if op_type == "BitwiseAnd":
        for x, mask in ((xs[0], inputs[1]), (xs[1], inputs[0])):
            k = _low_bits_mask(mask, width)
            if k is not None:  # x & (2^k - 1) is x mod 2^k (Mod takes the divisor's sign), one node
                return Rewritten(op.Mod(x, np.asarray(1 << k, dtype=npt)))
    a, b = (_bit_planes(op, x, width) for x in xs)
    if op_type == "BitwiseAnd":
        bits = op.Mul(a, b)
    elif op_type == "BitwiseOr":
        bits = op.Sub(op.Add(a, b), op.Mul(a, b))
    else:
        bits = op.Mod(op.Add(a, b), np.uint64(2))
    return Rewritten(_from_bit_planes(op, op.Cast(bits, to=I64), width, dtype))


def _from_bit_planes(op: Any, bits: ir.Value, width: int, dtype: ir.DataType) -> ir.Value:
    """The integer of ``dtype`` whose bits are ``bits`` (int64 0/1 along the last axis, bit 0 first).

    The weighted sum is taken 32 bits at a time: onnxruntime's int64 ReduceSum is not exact above
    2^53 (measured: it loses the low bits of 2^62 + 2^61 + 3), while every partial sum here stays
    below 2^32. Up to 32 bits the top bit of a signed type weighs -2^(w-1), so the sum is the
    value itself; 64-bit values are put together as hi·2^32 + lo in (wrapping) uint64."""
    signed = dtype.numpy().kind == "i"

    def partial(lo: int, hi: int, signed_top: bool) -> ir.Value:
        weights = np.zeros(width, dtype=np.int64)
        weights[lo:hi] = [1 << (i - lo) for i in range(lo, hi)]
        if signed_top:
            weights[hi - 1] = -weights[hi - 1]
        return op.ReduceSum(op.Mul(bits, weights), np.asarray([-1], dtype=np.int64), keepdims=0)

    if width <= 32:
        total = partial(0, width, signed)
        return total if dtype == ir.DataType.INT64 else op.Cast(total, to=int(dtype))
    low, high = (op.Cast(partial(a, a + 32, False), to=U64) for a in (0, 32))
    total = op.Add(op.Mul(high, np.uint64(1 << 32)), low)
    return total if dtype == ir.DataType.UINT64 else op.Cast(total, to=int(dtype))


def _low_bits_mask(v: Any, width: int) -> int | None:
    """k when ``v`` is a constant whose every element is 2^k - 1 with 0 < k < width."""
    values = constants.constant_ints(v)
    if not values or len(set(values)) != 1:
        return None
    k = (values[0] + 1).bit_length() - 1
    return k if 0 < k < width and values[0] == (1 << k) - 1 else None


def _bit_planes(op: Any, x: ir.Value, width: int) -> ir.Value:
    """uint64 0/1 values of shape ``x.shape + [width]``: bit i of ``x`` at index i of the last axis
    (the uint64 view keeps an integer's low bits: signed values sign-extend, unsigned zero-extend)."""
    u = x if _dtype(x) == ir.DataType.UINT64 else op.Cast(x, to=U64)
    shifted = op.BitShift(
        op.Unsqueeze(u, np.asarray([-1], dtype=np.int64)), np.arange(width, dtype=np.uint64), direction="RIGHT"
    )
    return op.Mod(shifted, np.uint64(2))


# --------------------------------------------------------------------------------------------
# ScatterND min/max (opset 18) as a sort and a scatter of unique indices


@_rule("ScatterND", "ScatterElements")
def _scatter(op, op_type, inputs, attrs, n_out, opset):
    """``reduction="min"/"max"`` is opset 18. Before, ScatterND's is rebuilt exactly, repeated
    indices included: every updated element gets its flat position in the data (GatherND of an iota
    shaped like the data), the updates are ordered by value (best first) and then, stably, by
    position (TopK breaks ties by index), so the first of each run of equal positions is the
    reduction of its run; those firsts (Compress) are combined with the data (Min/Max) and written
    with a plain scatter, whose indices are now unique. O(n log n) in the number of updated
    elements. ScatterElements' min/max (which no pack emits) is declined."""
    reduction = attrs.get("reduction")
    if opset >= 18 or reduction not in ("min", "max"):
        return inputs, attrs
    if op_type != "ScatterND":
        raise OpUnavailableError(f"{op_type}(reduction={reduction!r})", 18, opset)
    data, indices, updates = inputs
    dtype = _dtype(data)
    key_of = _SORT_KEYS.get(dtype) if dtype is not None else None
    if key_of is None:
        raise OpUnavailableError(
            f"ScatterND(reduction={reduction!r})",
            18,
            opset,
            f"no exact decomposition for {dtype.name if dtype else 'an unknown dtype'}",
        )
    shape = op.Shape(data)
    # allowzero: a 0 in the (runtime) shape is an empty dim, not "copy the input's dim"
    positions = op.Reshape(op.Range(np.int64(0), op.Size(data), np.int64(1)), shape, allowzero=1)
    target = op.Reshape(op.GatherND(positions, indices), np.asarray([-1], dtype=np.int64))
    flat_upd = op.Reshape(updates, np.asarray([-1], dtype=np.int64))
    k = op.Shape(target)
    _, by_value = op.TopK(key_of(op, flat_upd), k, axis=0, largest=int(reduction == "max"), sorted=1, _outputs=2)
    sorted_pos, by_pos = op.TopK(op.Gather(target, by_value), k, axis=0, largest=0, sorted=1, _outputs=2)
    best = op.Gather(flat_upd, op.Gather(by_value, by_pos))
    # first of each run: the position differs from the previous one (the first element always)
    new_run = op.Not(
        op.Equal(
            op.Slice(sorted_pos, np.asarray([1], np.int64), np.asarray([2**62], np.int64)),
            op.Slice(sorted_pos, np.asarray([0], np.int64), np.asarray([-1], np.int64)),
        )
    )
    first = op.Slice(op.Concat(np.asarray([True]), new_run, axis=0), np.asarray([0], np.int64), k)
    where, best = op.Compress(sorted_pos, first, axis=0), op.Compress(best, first, axis=0)
    flat = op.Reshape(data, np.asarray([-1], dtype=np.int64))
    combine = op.Min if reduction == "min" else op.Max
    written = op.ScatterElements(flat, where, combine(op.Gather(flat, where), best), axis=0)
    return Rewritten(op.Reshape(written, shape, allowzero=1))


def _key_as(dtype: ir.DataType) -> Callable[[Any, ir.Value], ir.Value]:
    return lambda op, v: op.Cast(v, to=int(dtype))


#: dtype -> a value with the same order that onnxruntime's TopK sorts (float, double, int32, int64).
_SORT_KEYS: dict[ir.DataType, Callable[[Any, ir.Value], ir.Value]] = {
    ir.DataType.FLOAT: lambda op, v: v,
    ir.DataType.DOUBLE: lambda op, v: v,
    ir.DataType.INT32: lambda op, v: v,
    ir.DataType.INT64: lambda op, v: v,
    ir.DataType.FLOAT16: _key_as(ir.DataType.FLOAT),
    ir.DataType.BFLOAT16: _key_as(ir.DataType.FLOAT),
    ir.DataType.INT8: _key_as(ir.DataType.INT32),
    ir.DataType.INT16: _key_as(ir.DataType.INT32),
    ir.DataType.UINT8: _key_as(ir.DataType.INT32),
    ir.DataType.UINT16: _key_as(ir.DataType.INT32),
    ir.DataType.UINT32: _key_as(ir.DataType.INT64),
    ir.DataType.BOOL: _key_as(ir.DataType.INT32),
    # uint64 ordered as int64: shift by 2^63 (wrapping uint64 addition), then reinterpret
    ir.DataType.UINT64: lambda op, v: op.Cast(op.Add(v, np.uint64(1 << 63)), to=I64),
}


# --------------------------------------------------------------------------------------------
# AveragePool with dilations (opset 19) as a Conv


@_rule("AveragePool")
def _average_pool(op, op_type, inputs, attrs, n_out, opset):
    """``dilations`` is opset 19. Unit dilations are dropped; others become a Conv of the input
    (batch and channels folded into one batch axis, one channel) with a kernel of ones, divided by
    the window size — or, with ``count_include_pad=0`` and padding, by the number of real elements
    each window covers (the same Conv of ones over the unpadded extent). ``ceil_mode`` with
    dilations is declined (a Conv has no ceil mode)."""
    dilations = attrs.get("dilations")
    if opset >= 19 or dilations is None:
        return inputs, attrs
    if all(int(d) == 1 for d in dilations):
        attrs.pop("dilations")
        return inputs, attrs
    if attrs.get("ceil_mode"):
        raise OpUnavailableError("AveragePool(dilations, ceil_mode=1)", 19, opset)
    x = inputs[0]
    dtype = _dtype(x)
    if dtype is None:
        raise OpUnavailableError("AveragePool(dilations)", 19, opset, "the input's dtype is unknown")
    kernel_shape = [int(k) for k in attrs["kernel_shape"]]
    conv_attrs = {k: attrs[k] for k in ("auto_pad", "pads", "strides", "dilations") if attrs.get(k) is not None}
    ones = np.ones([1, 1, *kernel_shape], dtype=dtype.numpy())
    folded = op.Reshape(x, op.Concat(np.asarray([-1, 1], np.int64), op.Shape(x, start=2), axis=0))
    sums = op.Conv(folded, ones, kernel_shape=kernel_shape, **conv_attrs)
    padded = attrs.get("auto_pad", "NOTSET") not in ("NOTSET", "VALID") or any(int(p) for p in attrs.get("pads") or [])
    if padded and not attrs.get("count_include_pad"):
        field = op.ConstantOfShape(
            op.Concat(np.asarray([1, 1], np.int64), op.Shape(x, start=2), axis=0), value=np.ones(1, dtype=dtype.numpy())
        )
        y = op.Div(sums, op.Conv(field, ones, kernel_shape=kernel_shape, **conv_attrs))
    else:
        y = op.Div(sums, np.asarray(int(np.prod(kernel_shape)), dtype=dtype.numpy()))
    return Rewritten(op.Reshape(y, op.Concat(op.Shape(x, start=0, end=2), op.Shape(sums, start=2), axis=0)))


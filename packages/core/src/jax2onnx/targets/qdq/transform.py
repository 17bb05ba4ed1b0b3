"""The QDQ rewrite: a float32 graph made static, its compute ops each between ``DequantizeLinear``
and ``QuantizeLinear`` with calibrated scales (the form NPU compilers such as Qualcomm's QNN,
Intel's and AMD's read as integer kernels).

1. **Static shapes.** Each symbolic input axis takes its size from ``Precision("qdq", dims=...)``;
   one without a size is refused, naming it. Shapes are then inferred again (with data propagation)
   and what computed shapes from the symbols (``Shape`` -> ``Gather`` -> ``Concat`` -> ``Reshape``)
   is folded into constants.
2. **What is quantized.** Main-graph nodes of :data:`QUANTIZED_OPS`: the matmuls and convolutions
   (:data:`COMPUTE_OPS`, ``Einsum`` included: attention's batched matmuls); ``Add``/``Mul``/``Sub`` with an activation input (a residual, a bias on a
   3-D matmul, a scale); pooling and ``Resize``; activations NPUs run as lookup tables (``Relu``,
   ``Sigmoid``, ``Tanh``, ``Gelu``, ``Softmax``, ...; a ``Relu`` right after a matmul, convolution or addition is fused with it: only its
   output is quantized); and the ops that move data without changing values (:data:`SHARED_SCALE_OPS`:
   ``Reshape``, ``Transpose``, ``Concat``, ``Split``, ``Slice``, ``Pad``, ``MaxPool``, ...), whose
   inputs and outputs share one scale (a ``Concat``'s inputs all take the scale of its output) so that they stay exact on
   integers. Every float activation such a node reads or writes gets a
   ``QuantizeLinear``/``DequantizeLinear`` pair (``activations``: uint16 or uint8, asymmetric, one
   scale and zero point per tensor; the range always holds 0, so zero padding is exact); a float
   constant it reads outside a weight slot is stored as codes of that type with the same scale.
3. **Weights.** A constant ``MatMul``/``Gemm`` weight (2-D) and ``Conv``/``ConvTranspose`` kernel:
   ``weights="int8"`` symmetric with one scale per output channel (zero point 0), ``"uint8"``
   asymmetric per output channel, ``"int4"`` (matmul weights only; kernels stay int8) symmetric
   blocks of ``block_size`` along K (blocked ``DequantizeLinear``, opset 21). A ``Gemm``/``Conv``
   bias is int32 with scale ``input scale x weight scale`` per channel, as integer kernels add it
   (under int4 the largest block scale of the channel).
4. **Scales.** A ``Softmax`` input's range reaches :data:`SOFTMAX_SPAN` below its maximum at most.
   From the float32 graph's ranges on the calibration data or the probe set (the
   precision stage's runner, :mod:`jax2onnx.precision.ranges`; min/max: 16-bit activations have
   the levels to hold every value seen, and a clipped outlier is an error a percentile cannot
   bound; min/max is onnxruntime's ``quantize_static`` default too).

Nodes inside control-flow bodies and function bodies stay float (the target's check lists them), and
so does a node a front-end marked with :data:`KEEP_FLOAT` in its ``metadata_props`` before the
precision stage (its value says why: an LLM's head, which NPUs leave on the CPU in float).
Graph inputs and outputs stay float32: the graph quantizes at its edges.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import ml_dtypes
import numpy as np
import onnx_ir as ir
from onnx_ir.passes.common import ShapeInferencePass

from ...errors import PrecisionError
from ...ir.graphs import FreshNames
from ...passes.constant_folding import ConstantFoldingPass
from ...passes.dead_code import DeadCodeEliminationPass

COMPUTE_OPS = frozenset({"MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum"})
ARITHMETIC_OPS = frozenset({"Add", "Mul", "Sub"})
#: ops whose output holds values of their input (or inputs): one scale for all, exact on integers
SHARED_SCALE_OPS = frozenset({"Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Split", "Slice",
                              "Pad", "MaxPool", "GlobalMaxPool", "Identity"})
#: ops with an output range of their own: a calibrated scale each (NPUs run the activations as tables)
OWN_SCALE_OPS = frozenset({"AveragePool", "GlobalAveragePool", "Resize", "Relu", "LeakyRelu", "Sigmoid", "Tanh",
                           "HardSigmoid", "HardSwish", "Gelu", "Softmax"})
QUANTIZED_OPS = COMPUTE_OPS | ARITHMETIC_OPS | SHARED_SCALE_OPS | OWN_SCALE_OPS
#: how far below its calibrated maximum a ``Softmax`` input's range reaches, per activation type: a
#: value further down weighs less than exp(-span) of the largest (1e-28 / 4e-11), which the output's
#: levels cannot hold anyway, so an additive mask's lowest-finite entries (-3.4e38) clip to the range's
#: floor instead of stretching one scale over 1e38 (and zeroing every real score)
SOFTMAX_SPAN = {"uint16": 64.0, "uint8": 24.0}
#: activation type -> (ir dtype, numpy dtype, largest code)
ACTIVATION_TYPES = {"uint16": (ir.DataType.UINT16, np.uint16, 65535), "uint8": (ir.DataType.UINT8, np.uint8, 255)}
F32 = ir.DataType.FLOAT
STANDARD = ("", "ai.onnx")
#: a node's metadata key (the value: why) that leaves it float: a front-end's choice, explained by the check
KEEP_FLOAT = "jax2onnx.qdq.keep_float"


@dataclasses.dataclass
class QdqResult:
    """What the rewrite did, for the precision's detail."""

    quantized: dict[str, int]
    tensors: int
    data: str
    dims: dict[str, int]

    def describe(self) -> str:
        ops = ", ".join(f"{n} {op}" for op, n in sorted(self.quantized.items()))
        fixed = f"; static dims {', '.join(f'{k}={v}' for k, v in self.dims.items())}" if self.dims else ""
        return f"QDQ around {ops}; {self.tensors} activation scales from {self.data}{fixed}"


def static_shapes(model: ir.Model, dims: dict[str, int]) -> dict[str, int]:
    """Fix every symbolic input axis from ``dims`` (refusing one without a size) and infer the
    shapes again; returns the sizes used."""
    used: dict[str, int] = {}
    for v in model.graph.inputs:
        if v.shape is None:
            raise PrecisionError(f"target='qdq' writes static shapes and input {v.name!r} has no shape; export it "
                                 "with a shaped input spec")
        new = []
        for axis, d in enumerate(v.shape):
            if isinstance(d, int):
                new.append(d)
                continue
            symbol = getattr(d, "value", None)
            if symbol not in dims:
                raise PrecisionError(
                    f"target='qdq' writes static shapes, and input {v.name!r} axis {axis} is symbolic ({symbol!r}); give "
                    f"its size: Precision('qdq', dims={{{symbol!r}: ...}}), or export with a fixed size in the input spec")
            used[symbol] = dims[symbol]
            new.append(dims[symbol])
        v.shape = ir.Shape(new)
    unknown = sorted(set(dims) - set(used))
    if unknown:
        raise PrecisionError(f"dims names {', '.join(map(repr, unknown))}, which no input axis is (the symbolic axes: "
                             f"{', '.join(map(repr, sorted(used))) or 'none'}); drop it or name an input spec's symbol")
    if used:
        for node in model.graph:  # the symbolic intermediates are inferred again from the fixed inputs
            for out in node.outputs:
                out.shape = None
        ShapeInferencePass(check_type=False, strict_mode=False, data_prop=True)(model)
        # what computed shapes from the symbols (Shape -> Gather -> Concat -> Reshape) is constant now
        ConstantFoldingPass()(model)
        DeadCodeEliminationPass()(model)
    return used


class _Groups:
    """Union-find over activation keys: the tensors one scale serves."""

    def __init__(self) -> None:
        self.parent: dict[object, object] = {}

    def find(self, key: object) -> object:
        self.parent.setdefault(key, key)
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def union(self, a: object, b: object) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[ra] = rb


def _is_float(v: ir.Value | None) -> bool:
    return v is not None and v.dtype == F32


def _constant(v: ir.Value) -> np.ndarray | None:
    if v.const_value is not None:
        return v.const_value.numpy()
    producer = v.producer()
    if producer is not None and producer.op_type == "Constant" and "value" in producer.attributes:
        return producer.attributes["value"].value.numpy()
    return None


def _weight_axis(node: ir.Node, slot: int, w: np.ndarray) -> int | None:
    """The output-channel axis of a weight slot of ``node``, or None where ``slot`` is no weight."""
    if slot != 1:
        return None
    if node.op_type == "MatMul" and w.ndim == 2:
        return 1
    if node.op_type == "Gemm":
        attr = node.attributes.get("transB")
        return 0 if attr is not None and attr.value else 1
    if node.op_type == "Conv":
        return 0
    if node.op_type == "ConvTranspose":
        group = node.attributes.get("group")
        return 1 if group is None or group.value == 1 else None
    return None


def _bias_slot(node: ir.Node, slot: int) -> bool:
    if slot != 2:
        return False
    if node.op_type == "Gemm":
        return all(node.attributes.get(a) is None or node.attributes[a].value == 1.0 for a in ("alpha", "beta"))
    return node.op_type in ("Conv", "ConvTranspose")


def activation_params(low: float, high: float, qmax: int) -> tuple[float, int]:
    """Asymmetric (scale, zero point) over ``[min(low, 0), max(high, 0)]`` in ``0..qmax``."""
    low, high = min(low, 0.0), max(high, 0.0)
    scale = (high - low) / qmax if high > low else 1.0
    return float(np.float32(scale)), int(np.clip(np.rint(-low / scale), 0, qmax))


def per_channel(w: np.ndarray, axis: int, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Codes, scales ``[C]`` and zero points ``[C]`` of ``w`` per slice along ``axis``: int8
    symmetric (-127..127, zero point 0) or uint8 asymmetric (each channel's min..max, 0 held)."""
    moved = np.moveaxis(w.astype(np.float32), axis, 0).reshape(w.shape[axis], -1)
    shape = [1] * w.ndim
    shape[axis] = w.shape[axis]
    if kind == "int8":
        amax = np.abs(moved).max(axis=1)
        scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
        codes = np.clip(np.rint(w / scale.reshape(shape)), -127, 127).astype(np.int8)
        return codes, scale, np.zeros_like(scale, dtype=np.int8)
    low, high = np.minimum(moved.min(axis=1), 0.0), np.maximum(moved.max(axis=1), 0.0)
    scale = np.where(high > low, (high - low) / 255.0, 1.0).astype(np.float32)
    zp = np.clip(np.rint(-low / scale), 0, 255).astype(np.uint8)
    codes = np.clip(np.rint(w / scale.reshape(shape)) + zp.reshape(shape), 0, 255).astype(np.uint8)
    return codes, scale, zp


def int4_blocked(w: np.ndarray, axis: int, block_size: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int4 codes (-7..7) of 2-D ``w`` in blocks of ``block_size`` along ``axis`` (K),
    with the scales ``ceil(K / block)`` along that axis (blocked ``DequantizeLinear``'s layout)."""
    w = np.asarray(w, np.float32)
    K = w.shape[axis]
    blocks = -(-K // block_size)
    padded = np.zeros((blocks * block_size, w.shape[1 - axis]), np.float32)
    padded[:K] = w if axis == 0 else w.T
    amax = np.abs(padded.reshape(blocks, block_size, -1)).max(axis=1)
    scale = np.where(amax > 0, amax / 7.0, 1.0).astype(np.float32)  # [blocks, N]
    codes = np.clip(np.rint(padded / np.repeat(scale, block_size, axis=0)), -7, 7)[:K]
    if axis == 1:
        codes, scale = codes.T, scale.T
    return np.ascontiguousarray(codes).astype(ml_dtypes.int4), np.ascontiguousarray(scale)


class _Writer:
    """Adds initializers and Q/DQ nodes to the main graph under fresh names."""

    def __init__(self, model: ir.Model) -> None:
        self.graph = model.graph
        self.name = FreshNames(model)

    def const(self, base: str, array: np.ndarray) -> ir.Value:
        name = self.name(base)
        tensor = ir.tensor(array, name=name)
        value = ir.Value(name=name, const_value=tensor, type=ir.TensorType(tensor.dtype), shape=tensor.shape)
        self.graph.register_initializer(value)
        return value

    def node(self, op: str, inputs: list[ir.Value], base: str, attrs: Sequence[ir.Attr] = ()) -> ir.Value:
        out = ir.Value(name=self.name(base))
        self.graph.append(ir.Node("", op, inputs, list(attrs), outputs=[out], name=self.name(f"{base}_node")))
        return out


Ranges = Callable[[ir.Model, list[str], Any], tuple[dict[str, tuple[float, float]], str]]


def quantize_qdq(model: ir.Model, p: Any, ranges_of: Ranges) -> QdqResult:
    """Rewrite ``model`` in place into ``p``'s QDQ form (a checked ``Precision("qdq")``; see the
    module doc); ``ranges_of(model, names, batches)`` calibrates (the precision stage's runner)."""
    graph = model.graph
    dims = static_shapes(model, dict(p.dims))
    qtype, np_qtype, qmax = ACTIVATION_TYPES[p.activations]
    groups = _Groups()
    nodes = [n for n in graph if n.op_type in QUANTIZED_OPS and n.domain in STANDARD and _quantizable(n)
             and KEEP_FLOAT not in n.metadata_props]
    weights: list[tuple[ir.Node, int, int]] = []  # (node, slot, channel axis)
    biases: list[tuple[ir.Node, int, int]] = []
    constants: dict[tuple[int, int], np.ndarray] = {}  # (id(node), slot) -> a float constant stored as activation codes
    tensors: dict[int, ir.Value] = {}  # activations to Q/DQ, by id
    for node in nodes:
        keys = []
        for slot, v in enumerate(node.inputs):
            if not _is_float(v) or fused_relu(v):
                continue
            array = _constant(v)
            if array is not None and (axis := _weight_axis(node, slot, array)) is not None:
                weights.append((node, slot, axis))
                continue
            if (array is not None and _bias_slot(node, slot) and weights and weights[-1][0] is node
                    and array.shape == (_constant(node.inputs[1]).shape[weights[-1][2]],)
                    and not _is_constant_or_none(node.inputs[0])):
                biases.append((node, slot, id(node.inputs[0])))  # scaled by input 0's scale x the weight's
                continue
            if array is not None:
                key = (id(node), slot)
                constants[key] = array.astype(np.float32)
            else:
                key = id(v)
                tensors[key] = v
            groups.find(key)
            keys.append(key)
        for out in node.outputs:
            if _is_float(out) and not fused_relu(out):
                tensors[id(out)] = out
                groups.find(id(out))
                if node.op_type in SHARED_SCALE_OPS:
                    for key in keys:
                        groups.union(key, id(out))

    ranges, data = ranges_of(model, [v.name for v in tensors.values()], p.calibration)
    spans: dict[object, tuple[float, float]] = {}
    for key in groups.parent:
        if key in tensors:
            low, high = ranges.get(tensors[key].name, (0.0, 0.0))
        else:
            low, high = float(constants[key].min(initial=0.0)), float(constants[key].max(initial=0.0))
        if key in tensors and any(user.op_type == "Softmax" for user, _ in tensors[key].uses()):
            low = max(low, high - SOFTMAX_SPAN[p.activations])
        root = groups.find(key)
        old = spans.get(root, (low, high))
        spans[root] = (min(old[0], low), max(old[1], high))
    params = {root: activation_params(low, high, qmax) for root, (low, high) in spans.items()}

    writer = _Writer(model)
    scale_values: dict[object, tuple[ir.Value, ir.Value]] = {}

    def scale_of(key: object) -> tuple[ir.Value, ir.Value]:
        root = groups.find(key)
        if root not in scale_values:
            scale, zp = params[root]
            scale_values[root] = (writer.const("qdq_scale", np.array(scale, np.float32)),
                                  writer.const("qdq_zero_point", np.array(zp, np_qtype)))
        return scale_values[root]

    for key, v in tensors.items():
        _wrap(writer, graph, v, *scale_of(key))
    for (node_id, slot), array in constants.items():
        node = next(n for n in nodes if id(n) == node_id)
        scale, zp = params[groups.find((node_id, slot))]
        codes = np.clip(np.rint(array / scale) + zp, 0, qmax).astype(np_qtype)
        node.replace_input_with(slot, writer.node("DequantizeLinear", [writer.const("qdq_constant", codes),
                                                                       *scale_of((node_id, slot))], "qdq_constant_dq"))
    weight_scales = _write_weights(writer, weights, p)
    for node, slot, x_key in biases:
        bias = _constant(node.inputs[slot]).astype(np.float32)
        b_scale = (params[groups.find(x_key)][0] * weight_scales[id(node)]).astype(np.float32)
        codes = np.clip(np.rint(bias / b_scale), -(2**31) + 1, 2**31 - 1).astype(np.int32)
        node.replace_input_with(slot, writer.node("DequantizeLinear", [writer.const("qdq_bias", codes),
                                                                       writer.const("qdq_bias_scale", b_scale)],
                                                  "qdq_bias_dq", [ir.AttrInt64("axis", 0)]))
    _drop_unused_initializers(graph)
    graph.sort()
    counts: dict[str, int] = {}
    for node in nodes:
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return QdqResult(counts, len(spans), data, dims)


def fused_relu(v: ir.Value) -> bool:
    """``v`` is a matmul's, convolution's or addition's output read by one ``Relu`` only: NPU
    compilers fuse the pair, so only the ``Relu``'s output is quantized (its negative half would
    waste a bit of the range)."""
    producer = v.producer()
    uses = list(v.uses())
    return (producer is not None and producer.op_type in COMPUTE_OPS | ARITHMETIC_OPS and not v.is_graph_output()
            and len(uses) == 1 and uses[0][0].op_type == "Relu")


def _is_constant_or_none(v: ir.Value | None) -> bool:
    return v is None or _constant(v) is not None


def _quantizable(node: ir.Node) -> bool:
    """Arithmetic only with an activation input (two constants fold; they are no NPU work)."""
    if node.op_type in ARITHMETIC_OPS:
        return any(_is_float(v) and _constant(v) is None for v in node.inputs)
    return any(_is_float(v) for v in node.inputs)


def _wrap(writer: _Writer, graph: ir.Graph, v: ir.Value, scale: ir.Value, zp: ir.Value) -> None:
    """``v``'s readers read ``DequantizeLinear(QuantizeLinear(v))``; a graph output becomes the
    dequantized value under ``v``'s name."""
    uses = list(v.uses())
    q = writer.node("QuantizeLinear", [v, scale, zp], f"{v.name}_q")
    dq = writer.node("DequantizeLinear", [q, scale, zp], f"{v.name}_dq")
    dq.dtype, dq.shape = F32, v.shape
    q.dtype, q.shape = zp.dtype, v.shape
    for user, slot in uses:
        user.replace_input_with(slot, dq)
    for i, out in enumerate(graph.outputs):
        if out is v:
            name = v.name
            v.name = writer.name(f"{name}_float")
            dq.name = name
            graph.outputs[i] = dq


def _write_weights(writer: _Writer, weights: list[tuple[ir.Node, int, int]], p: Any) -> dict[int, np.ndarray]:
    """Each weight as codes + ``DequantizeLinear``; returns each node's per-channel weight scale
    (what its int32 bias is scaled by)."""
    done: dict[tuple[int, int, bool], tuple[ir.Value, np.ndarray]] = {}
    scales: dict[int, np.ndarray] = {}
    for node, slot, axis in weights:
        v = node.inputs[slot]
        blocked = p.weights == "int4" and node.op_type in ("MatMul", "Gemm")
        key = (id(v), axis, blocked)
        if key not in done:
            w = _constant(v)
            base = v.name or "weight"
            if blocked:
                k_axis = 1 - axis
                codes, scale = int4_blocked(w, k_axis, p.block_size)
                dq = writer.node("DequantizeLinear", [writer.const(f"{base}_q4", codes), writer.const(f"{base}_scale", scale)],
                                 f"{base}_dq", [ir.AttrInt64("axis", k_axis), ir.AttrInt64("block_size", p.block_size)])
                channel = scale.max(axis=k_axis)
            else:
                codes, channel, zp = per_channel(w, axis, "int8" if p.weights == "int4" else p.weights)
                dq = writer.node("DequantizeLinear", [writer.const(f"{base}_q", codes), writer.const(f"{base}_scale", channel),
                                                      writer.const(f"{base}_zero_point", zp)],
                                 f"{base}_dq", [ir.AttrInt64("axis", axis)])
            dq.dtype, dq.shape = F32, ir.Shape(w.shape)
            done[key] = (dq, channel)
        dq, channel = done[key]
        node.replace_input_with(slot, dq)
        scales[id(node)] = channel
    return scales


def _drop_unused_initializers(graph: ir.Graph) -> None:
    for name, value in list(graph.initializers.items()):
        if not value.uses() and not value.is_graph_output():
            del graph.initializers[name]


__all__ = ["COMPUTE_OPS", "KEEP_FLOAT", "QUANTIZED_OPS", "SHARED_SCALE_OPS", "QdqResult", "quantize_qdq", "static_shapes"]

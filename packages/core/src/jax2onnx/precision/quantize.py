"""int8 / int4 export: quantize the weight matmuls of the main graph, one weight at a time.

A *weight matmul* is a ``MatMul`` whose second operand is a 2-D float32 initializer ``[K, N]``, or
a ``Gemm`` with such a ``B`` (``transB`` allowed, ``alpha = beta = 1``, no ``transA``; a 1-D ``C``
of ``N`` becomes the quantized op's bias, any other ``C`` an ``Add`` after it).

- **int8** (dynamic): weights int8 with one scale per output column (symmetric, max |w| / 127);
  activations are quantized at run time, per tensor. ``com.microsoft.DynamicQuantizeMatMul``
  by default, or standard ``DynamicQuantizeLinear`` + ``MatMulInteger`` (``int8_kernel=``).
- **int4** (weight-only): ``com.microsoft.MatMulNBits`` with round-to-nearest blocks of
  ``block_size`` along K, symmetric or with zero points. The block quantizer is onnxruntime's
  (``onnxruntime.quantization``'s ``DefaultWeightOnlyQuantizer.qbits_block_quant``, called on one
  tensor: an optional dependency of this precision only).
- embedding tables (``Gather`` on axis 0 of a 2-D float32 initializer), with ``embeddings="int8"``:
  int8 rows and one scale per row, gathered together.

The int8 scales are a few lines of numpy: onnxruntime's public helper quantizes per tensor, and its
per-channel path lives inside its whole-model quantizer, which would hold the model in memory.

Streamed weights (:class:`~jax2onnx.Weights`) stay lazy: a quantized weight's parts (codes,
scales, zero points) are initializers that quantize their source when the first of them is
written and share that result until each part has been written once, so memory holds one
weight's result at a time.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir

from ..errors import RUNTIME_INSTALL_HINT
from .options import Precision, PrecisionError

F32 = ir.DataType.FLOAT
MS_DOMAIN = "com.microsoft"


@dataclasses.dataclass
class QuantizeResult:
    kind: str
    int4: list[str] = dataclasses.field(default_factory=list)
    int8: list[str] = dataclasses.field(default_factory=list)
    excluded: list[str] = dataclasses.field(default_factory=list)
    embeddings: list[str] = dataclasses.field(default_factory=list)

    def describe(self) -> str:
        parts = []
        if self.int4:
            parts.append(f"{len(self.int4)} matmul weight(s) int4")
        if self.int8:
            parts.append(f"{len(self.int8)} matmul weight(s) int8")
        if self.embeddings:
            parts.append(f"{len(self.embeddings)} embedding table(s) int8")
        if self.excluded:
            parts.append(f"{len(self.excluded)} excluded (float32): {', '.join(self.excluded)}")
        return "; ".join(parts)


# ---------------------------------------------------------------------------------------------
# The quantizers (one tensor each)


def int8_per_column(w: np.ndarray, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 codes and float32 scales, one scale per slice along ``axis`` reduced away
    (``axis=0`` of ``[K, N]``: a scale per column)."""
    w = np.asarray(w, dtype=np.float32)
    amax = np.max(np.abs(w), axis=axis, keepdims=True)
    scale = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
    codes = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return codes, np.squeeze(scale, axis=axis)


@functools.cache
def _block_quantizer(block_size: int, symmetric: bool) -> Any:
    import logging

    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        from onnxruntime.quantization.matmul_nbits_quantizer import (
            DefaultWeightOnlyQuantConfig,
            DefaultWeightOnlyQuantizer,
        )
    except ImportError as exc:
        raise PrecisionError(f"precision='int4' quantizes with onnxruntime's block quantizer, which is not installed: "
                             f"{RUNTIME_INSTALL_HINT}") from exc
    finally:  # that module calls logging.basicConfig(level=INFO) on import: the user's logging is theirs
        root.handlers[:] = handlers
        root.setLevel(level)
    return DefaultWeightOnlyQuantizer(DefaultWeightOnlyQuantConfig(block_size=block_size, is_symmetric=symmetric, bits=4))


def int4_blocks(w: np.ndarray, block_size: int, symmetric: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """MatMulNBits' ``B`` (uint8 ``[N, blocks, block_size/2]``), ``scales`` (``[N, blocks]``) and
    ``zero_points`` (uint8 ``[N, ceil(blocks/2)]``) of ``w`` ``[K, N]``."""
    return _block_quantizer(block_size, symmetric).qbits_block_quant(np.ascontiguousarray(w, dtype=np.float32))


# ---------------------------------------------------------------------------------------------
# Quantized initializers, lazy when the weight is


class _Parts:
    """The parts of one quantized weight, computed from its tensor when the first is needed and
    kept until each part has been read once (a weight read from a source is then read once)."""

    def __init__(self, load: Callable[[], np.ndarray], fn: Callable[[np.ndarray], tuple[np.ndarray, ...]], n: int):
        self.load, self.fn, self.n = load, fn, n
        self.result: tuple[np.ndarray, ...] | None = None
        self.left = 0

    def get(self, k: int) -> np.ndarray:
        if self.result is None:
            self.result = self.fn(np.asarray(self.load(), dtype=np.float32))
            self.left = self.n
        part = self.result[k]
        self.left -= 1
        if self.left <= 0:
            self.result = None
        return part


def _part_values(graph: ir.Graph, w: _Weight, fn: Callable[[np.ndarray], tuple[np.ndarray, ...]],
                 specs: list[tuple[str, ir.DataType, tuple[int, ...]]]) -> list[ir.Value]:
    """Initializers for the parts of ``fn(weight)`` (``specs``: suffix, dtype, shape each)."""
    parts = _Parts(w.load, fn, len(specs))
    eager = None if w.lazy else fn(np.asarray(w.load(), dtype=np.float32))
    values = []
    for k, (suffix, dtype, shape) in enumerate(specs):
        name = _fresh(graph, f"{w.name}_{suffix}")
        if w.lazy:
            t: ir.TensorProtocol = ir.LazyTensor(functools.partial(lambda k, name: ir.Tensor(parts.get(k), name=name), k, name),
                                                 dtype=dtype, shape=ir.Shape(list(shape)), name=name)
        else:
            t = ir.Tensor(np.ascontiguousarray(eager[k]), name=name)
        v = ir.Value(name=name, type=ir.TensorType(dtype), shape=ir.Shape(list(shape)), const_value=t)
        graph.register_initializer(v)
        values.append(v)
    return values


def _fresh(graph: ir.Graph, base: str) -> str:
    name, k = base, 1
    while name in graph.initializers:
        k += 1
        name = f"{base}_{k}"
    return name


# ---------------------------------------------------------------------------------------------
# Finding weight matmuls


@dataclasses.dataclass
class _Weight:
    """A 2-D float32 weight: an initializer, or a constant expression of initializers (a streamed
    model's fused Q|K|V kernel is ``Concat(Reshape(q), Reshape(k), Reshape(v))``: nothing folds
    lazy weights), evaluated with numpy when the quantized parts are written."""

    name: str  # the first initializer it reads: what exclude/int8 patterns match
    sources: list[str]  # every initializer it reads
    shape: tuple[int, int]
    load: Callable[[], np.ndarray]
    lazy: bool


#: ops a weight expression may contain: data movement, computed exactly by numpy
_EXPRESSION_OPS = frozenset({"Reshape", "Transpose", "Concat", "Squeeze", "Unsqueeze", "Identity"})


def _expression(v: ir.Value, sources: list[ir.Value], depth: int = 0) -> Callable[[], np.ndarray] | None:
    tensor = v.const_value
    if tensor is not None:
        sources.append(v)
        return lambda: np.asarray(tensor.numpy())
    node = v.producer()
    if node is None or node.op_type not in _EXPRESSION_OPS or node.domain not in ("", "ai.onnx") or depth > 16:
        return None
    args = []
    for x in node.inputs:
        if x is None:
            args.append(None)
            continue
        arg = _expression(x, sources, depth + 1)
        if arg is None:
            return None
        args.append(arg)
    op = node.op_type
    axis = _attr(node, "axis", 0)
    perm = _attr(node, "perm", None)

    def run() -> np.ndarray:
        xs = [a() if a is not None else None for a in args]
        if op == "Concat":
            return np.concatenate(xs, axis=axis)
        if op == "Transpose":
            return np.transpose(xs[0], perm)
        if op == "Reshape":
            shape = [int(d) if d != 0 else xs[0].shape[i] for i, d in enumerate(xs[1])]
            return xs[0].reshape(shape)
        if op == "Squeeze":
            return np.squeeze(xs[0], axis=tuple(int(a) for a in xs[1])) if len(xs) > 1 and xs[1] is not None else np.squeeze(xs[0])
        if op == "Unsqueeze":
            out = xs[0]
            for a in sorted(int(a) % (out.ndim + len(xs[1])) for a in xs[1]):
                out = np.expand_dims(out, a)
            return out
        return xs[0]

    return run


def _weight(v: ir.Value | None) -> _Weight | None:
    if v is None or v.type is None or v.dtype != F32 or v.shape is None or len(v.shape) != 2:
        return None
    if not all(isinstance(d, int) for d in v.shape):
        return None
    sources: list[ir.Value] = []
    load = _expression(v, sources)
    if load is None or not sources:
        return None
    lazy = any(isinstance(x.const_value, ir.LazyTensor) for x in sources)
    name = v.name if v.const_value is not None else (sources[0].name or "weight")
    return _Weight(name or "weight", [x.name or "" for x in sources], (int(v.shape[0]), int(v.shape[1])), load, lazy)


@dataclasses.dataclass
class _WeightMatmul:
    node: ir.Node
    a: ir.Value
    weight: _Weight
    transposed: bool  # the weight is [N, K] (Gemm transB)
    bias: ir.Value | None  # a 1-D [N] addend (Gemm C)
    addend: ir.Value | None  # any other Gemm C, added after


def _const_2d_f32(v: ir.Value | None) -> bool:
    return (v is not None and v.const_value is not None and v.type is not None and v.dtype == F32
            and len(v.const_value.shape) == 2)


def _attr(node: ir.Node, name: str, default: Any) -> Any:
    a = node.attributes.get(name)
    return default if a is None else a.value


def _find(node: ir.Node) -> _WeightMatmul | None:
    if node.domain not in ("", "ai.onnx") or len(node.inputs) < 2 or node.op_type not in ("MatMul", "Gemm"):
        return None
    a = node.inputs[0]
    if a is None or a.type is None or a.dtype != F32:
        return None
    if a.shape is not None and len(a.shape) < 2:
        return None  # a vector times a matrix: MatMulNBits wants rows
    w = _weight(node.inputs[1])
    if w is None:
        return None
    if node.op_type == "MatMul":
        return _WeightMatmul(node, a, w, False, None, None)
    if _attr(node, "transA", 0) or _attr(node, "alpha", 1.0) != 1.0:
        return None
    c = node.inputs[2] if len(node.inputs) > 2 else None
    if c is not None and _attr(node, "beta", 1.0) != 1.0:
        return None
    transposed = bool(_attr(node, "transB", 0))
    n = w.shape[0 if transposed else 1]
    if c is not None and c.shape is not None and len(c.shape) == 1 and c.shape[0] == n and c.dtype == F32:
        return _WeightMatmul(node, a, w, transposed, c, None)
    return _WeightMatmul(node, a, w, transposed, None, c)


def _is_embedding(node: ir.Node) -> bool:
    return (node.op_type == "Gather" and node.domain in ("", "ai.onnx") and _attr(node, "axis", 0) == 0
            and _const_2d_f32(node.inputs[0]))


def _matches(name: str, patterns: Any) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


# ---------------------------------------------------------------------------------------------
# The rewrite


def quantize_weight_matmuls(model: ir.Model, p: Precision) -> QuantizeResult:
    graph = model.graph
    found = [m for m in (_find(node) for node in graph) if m is not None]
    embeddings = [node for node in graph if _is_embedding(node)] if p.embeddings == "int8" else []
    if not found and not embeddings:
        low = any(node.op_type in ("MatMul", "Gemm") and any(
            v is not None and v.type is not None and v.dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
            for v in (*node.inputs, *(x for i in node.inputs if i is not None and i.producer() is not None
                                       for x in i.producer().inputs)))
            for node in graph)
        why = ("its matmuls compute in float16/bfloat16 as traced (flax dtype=, a Keras mixed policy): export it as "
               "traced with precision='float32'" if low else
               "export it with precision='float16' or 'bfloat16' to make it smaller")
        raise PrecisionError(f"precision={p.kind!r} quantizes weight matmuls (MatMul/Gemm with a constant 2-D float32 "
                             f"weight), and this model has none; {why}")
    result = QuantizeResult(p.kind)
    counter = [0]
    for m in found:
        name = m.weight.name
        if any(_matches(n, p.exclude) for n in m.weight.sources):
            result.excluded.append(name)
            continue
        bits = 8 if p.kind == "int8" or any(_matches(n, p.int8) for n in m.weight.sources) else 4
        counter[0] += 1
        if bits == 4:
            _to_int4(graph, m, p, counter[0])
            result.int4.append(name)
        else:
            _to_int8(graph, m, p, counter[0])
            result.int8.append(name)
    for node in embeddings:
        table = node.inputs[0]
        if _matches(table.name or "", p.exclude):
            result.excluded.append(table.name)
            continue
        counter[0] += 1
        _embedding_int8(graph, node, _weight(table), counter[0])
        result.embeddings.append(table.name)
    if result.int4 or result.int8 or result.embeddings:
        model.opset_imports.setdefault(MS_DOMAIN, 1)
    else:
        raise PrecisionError(f"precision={p.kind!r}: exclude={list(p.exclude)!r} excludes every weight matmul of this "
                             "model, so nothing would be quantized; narrow the patterns")
    return result


def _kn(m: _WeightMatmul) -> tuple[int, int]:
    rows, cols = m.weight.shape
    return (cols, rows) if m.transposed else (rows, cols)


def _oriented(m: _WeightMatmul, fn: Callable[[np.ndarray], tuple[np.ndarray, ...]]) -> Callable[[np.ndarray], tuple[np.ndarray, ...]]:
    """``fn`` applied to the weight as ``[K, N]``."""
    return (lambda w: fn(np.ascontiguousarray(w.T))) if m.transposed else fn


def _replace(graph: ir.Graph, m: _WeightMatmul, nodes: list[ir.Node], out: ir.Value) -> None:
    if m.addend is not None:
        add = ir.Node("", "Add", [out, m.addend], outputs=[ir.Value(name=f"{out.name}_c")], name=f"{out.name}_add")
        nodes.append(add)
        out = add.outputs[0]
    old = m.node.outputs[0]
    out.type, out.shape = old.type, old.shape
    ir.convenience.replace_nodes_and_values(graph, m.node, [m.node], nodes, [old], [out])


def _to_int4(graph: ir.Graph, m: _WeightMatmul, p: Precision, k: int) -> None:
    K, N = _kn(m)
    blocks = -(-K // p.block_size)
    specs = [("q4", ir.DataType.UINT8, (N, blocks, p.block_size // 2)), ("scales", F32, (N, blocks))]
    if not p.symmetric:
        specs.append(("zero_points", ir.DataType.UINT8, (N, -(-blocks // 2))))
    fn = _oriented(m, functools.partial(int4_blocks, block_size=p.block_size, symmetric=p.symmetric))
    parts = _part_values(graph, m.weight, lambda w: fn(w)[: len(specs)], specs)
    inputs: list[ir.Value | None] = [m.a, *parts]
    if m.bias is not None:
        inputs += [None] * (5 - len(inputs)) + [m.bias]
    attrs = [ir.AttrInt64("K", K), ir.AttrInt64("N", N), ir.AttrInt64("bits", 4), ir.AttrInt64("block_size", p.block_size)]
    if p.accuracy_level is not None:
        attrs.append(ir.AttrInt64("accuracy_level", p.accuracy_level))
    node = ir.Node(MS_DOMAIN, "MatMulNBits", inputs, attrs, outputs=[ir.Value(name=f"matmul_q4_{k}")], name=f"matmul_q4_{k}")
    _replace(graph, m, [node], node.outputs[0])


def _to_int8(graph: ir.Graph, m: _WeightMatmul, p: Precision, k: int) -> None:
    K, N = _kn(m)
    codes, scales = _part_values(graph, m.weight, _oriented(m, int8_per_column),
                                 [("q8", ir.DataType.INT8, (K, N)), ("scales", F32, (N,))])
    if p.int8_kernel == "DynamicQuantizeMatMul":
        inputs: list[ir.Value | None] = [m.a, codes, scales]
        if m.bias is not None:
            inputs += [None, m.bias]
        node = ir.Node(MS_DOMAIN, "DynamicQuantizeMatMul", inputs, outputs=[ir.Value(name=f"matmul_q8_{k}")],
                       name=f"matmul_q8_{k}")
        _replace(graph, m, [node], node.outputs[0])
        return

    def v(name: str, dtype: ir.DataType | None = None) -> ir.Value:
        return ir.Value(name=f"{name}_{k}", type=ir.TensorType(dtype) if dtype is not None else None)

    quant = ir.Node("", "DynamicQuantizeLinear", [m.a], outputs=[v("a_q8", ir.DataType.UINT8), v("a_scale", F32),
                                                                  v("a_zero_point", ir.DataType.UINT8)], name=f"a_q8_{k}")
    q, a_scale, a_zp = quant.outputs
    mm = ir.Node("", "MatMulInteger", [q, codes, a_zp], outputs=[v("matmul_i32", ir.DataType.INT32)], name=f"matmul_i32_{k}")
    to_float = ir.Node("", "Cast", [mm.outputs[0]], [ir.AttrInt64("to", int(F32))], outputs=[v("matmul_f32", F32)],
                       name=f"matmul_f32_{k}")
    scale = ir.Node("", "Mul", [a_scale, scales], outputs=[v("matmul_scale", F32)], name=f"matmul_scale_{k}")
    out = ir.Node("", "Mul", [to_float.outputs[0], scale.outputs[0]], outputs=[v("matmul_q8", F32)], name=f"matmul_q8_{k}")
    nodes = [quant, mm, to_float, scale, out]
    if m.bias is not None:
        nodes.append(ir.Node("", "Add", [out.outputs[0], m.bias], outputs=[v("matmul_q8_bias", F32)], name=f"matmul_q8_bias_{k}"))
    _replace(graph, m, nodes, nodes[-1].outputs[0])


def _embedding_int8(graph: ir.Graph, node: ir.Node, table: _Weight, k: int) -> None:
    ids = node.inputs[1]
    V, D = table.shape

    def rows(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        codes, scale = int8_per_column(w, axis=1)
        return codes, scale.reshape(V, 1)

    codes, scales = _part_values(graph, table, rows, [("q8", ir.DataType.INT8, (V, D)), ("scales", F32, (V, 1))])
    g_codes = ir.Node("", "Gather", [codes, ids], outputs=[ir.Value(name=f"embedding_q8_{k}")], name=f"embedding_q8_{k}")
    g_scale = ir.Node("", "Gather", [scales, ids], outputs=[ir.Value(name=f"embedding_scale_{k}")], name=f"embedding_scale_{k}")
    to_float = ir.Node("", "Cast", [g_codes.outputs[0]], [ir.AttrInt64("to", int(F32))],
                       outputs=[ir.Value(name=f"embedding_f32_{k}")], name=f"embedding_f32_{k}")
    out = ir.Node("", "Mul", [to_float.outputs[0], g_scale.outputs[0]], outputs=[ir.Value(name=f"embedding_{k}")],
                  name=f"embedding_{k}")
    old = node.outputs[0]
    new = out.outputs[0]
    new.type, new.shape = old.type, old.shape
    ir.convenience.replace_nodes_and_values(graph, node, [node], [g_codes, g_scale, to_float, out], [old], [new])


__all__ = ["QuantizeResult", "int4_blocks", "int8_per_column", "quantize_weight_matmuls"]

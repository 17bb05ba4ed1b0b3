"""int8 / int4 export: quantize the weight matmuls of every graph, one weight at a time.

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
- embedding tables (``Gather`` on axis 0 of a 2-D float32 initializer), with ``embeddings="auto"``
  (default) in the precision's own width: under int4 ``com.microsoft.GatherBlockQuantized`` over
  4-bit rows (blocks of ``block_size`` along each row; a table whose width is not a multiple of the
  block is stored int8), under int8 int8 rows with one scale per row, gathered together.
  ``embeddings="int8"`` keeps int8 tables under int4.
- the LM head (a weight matmul writing a graph output, in a model with an embedding table) is
  quantized like the other matmuls (``lm_head="int4"``, default); ``lm_head="int8"`` keeps it int8
  under int4: each generated token is its argmax, and int8 keeps its logits' order closer to
  float32 where int4 blocks of a wide head can flip near ties (a trained LM keeps its greedy tokens
  either way: packages/core/tests/test_precision_trained_lm.py).
- with ``conv="int8"`` (default): convolution kernels int8 with one scale per output channel, and
  large constants added to activations (a ViT's position embedding) int8 with one scale per
  last-axis entry, each widened by one ``DequantizeLinear`` (weight-only: the Conv/Add computes
  in float32; onnxruntime folds the widening once when the session starts).

Where the weights are: the main graph's initializers (lazy ones stay lazy), ``Constant`` nodes of
function bodies (``@onnx_function``) and control-flow bodies (quantized in place, as Constants of
that body), outer initializers a body reads, and weights a ``Scan`` slices per iteration (a
``lax.scan`` / ``nnx.scan`` over stacked layers: the stacked ``[L, K, N]`` weight becomes stacked
codes and scales, scanned the same way, and the body's matmul reads the slices), and stacked weights a
``Loop`` body picks one layer of by the iteration number (``w[i]`` in a ``lax.fori_loop``: a
``Slice`` + ``Squeeze`` or a ``Gather`` on axis 0; the stacked codes and scales are picked the
same way in the body, with the same index).

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
from ..ir.constants import constant_ints
from ..ir.graphs import FreshNames, all_graphs
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
    embeddings4: list[str] = dataclasses.field(default_factory=list)
    convs: list[str] = dataclasses.field(default_factory=list)
    addends: list[str] = dataclasses.field(default_factory=list)
    scanned: list[str] = dataclasses.field(default_factory=list)  # stacked weights a Scan slices
    selected: list[str] = dataclasses.field(default_factory=list)  # stacked weights a body indexes (Loop)

    def describe(self) -> str:
        parts = []
        if self.int4:
            parts.append(f"{len(self.int4)} matmul weight(s) int4")
        if self.int8:
            parts.append(f"{len(self.int8)} matmul weight(s) int8")
        if self.scanned:
            parts.append(f"{len(self.scanned)} scanned stacked weight(s): {', '.join(self.scanned)}")
        if self.selected:
            parts.append(f"{len(self.selected)} stacked weight(s) indexed per iteration: {', '.join(self.selected)}")
        if self.embeddings:
            parts.append(f"{len(self.embeddings)} embedding table(s) int8")
        if self.embeddings4:
            parts.append(f"{len(self.embeddings4)} embedding table(s) int4")
        if self.convs:
            parts.append(f"{len(self.convs)} convolution kernel(s) int8")
        if self.addends:
            parts.append(f"{len(self.addends)} added constant(s) int8")
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


#: a part this small is kept once computed: onnx_ir's shape inference reads initializers under
#: 1000 bytes (a zero-point row) long before the writer reads the large parts
SMALL_PART_BYTES = 4096


class _Parts:
    """The parts of one quantized weight, computed from its tensor when the first is needed. The
    large parts are kept until each has been read once (then the weight's source was read once);
    small ones (scales, zero points of a small weight) stay, since shape inference reads them early."""

    def __init__(self, load: Callable[[], np.ndarray], fn: Callable[[np.ndarray], tuple[np.ndarray, ...]], n: int):
        self.load, self.fn, self.n = load, fn, n
        self.result: tuple[np.ndarray, ...] | None = None
        self.kept: dict[int, np.ndarray] = {}
        self.unread: set[int] = set()

    def get(self, k: int) -> np.ndarray:
        if k in self.kept:
            return self.kept[k]
        if self.result is None:
            self.result = self.fn(np.asarray(self.load(), dtype=np.float32))
            self.kept = {q: part for q, part in enumerate(self.result) if part.nbytes <= SMALL_PART_BYTES}
            self.unread = set(range(self.n)) - set(self.kept)
        part = self.result[k]
        self.unread.discard(k)
        if not self.unread:
            self.result = None
        return part


def _part_values(site: _Site, w: _Weight, fn: Callable[[np.ndarray], tuple[np.ndarray, ...]],
                 specs: list[tuple[str, ir.DataType, tuple[int, ...]]]) -> list[ir.Value]:
    """Values for the parts of ``fn(weight)`` (``specs``: suffix, dtype, shape each): main-graph
    initializers when the weight's sources are main-graph initializers (a body reads them from its
    outer scope), else ``Constant`` nodes in front of ``site.node`` (a function or body constant)."""
    graph = site.main
    if w.local:
        result = fn(np.asarray(w.load(), dtype=np.float32))
        values = []
        for k, (suffix, dtype, shape) in enumerate(specs):
            name = site.names(f"{w.name}_{suffix}")
            out = ir.Value(name=name, type=ir.TensorType(dtype), shape=ir.Shape(list(shape)))
            const = ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.Tensor(np.ascontiguousarray(result[k]), name=name))],
                            outputs=[out], name=f"{name}_const")
            site.owner.insert_before(site.node, const)
            values.append(out)
        return values
    parts = _Parts(w.load, fn, len(specs))
    eager = None if w.lazy else fn(np.asarray(w.load(), dtype=np.float32))
    values = []
    for k, (suffix, dtype, shape) in enumerate(specs):
        name = site.names(f"{w.name}_{suffix}")
        if w.lazy:
            t: ir.TensorProtocol = ir.LazyTensor(functools.partial(lambda k, name: ir.Tensor(parts.get(k), name=name), k, name),
                                                 dtype=dtype, shape=ir.Shape(list(shape)), name=name)
        else:
            t = ir.Tensor(np.ascontiguousarray(eager[k]), name=name)
        v = ir.Value(name=name, type=ir.TensorType(dtype), shape=ir.Shape(list(shape)), const_value=t)
        graph.register_initializer(v)
        values.append(v)
    return values


@dataclasses.dataclass
class _Site:
    """Where a rewrite happens: the node, the graph or function holding it, the main graph."""

    node: ir.Node
    owner: ir.Graph | ir.Function
    main: ir.Graph
    names: FreshNames


# ---------------------------------------------------------------------------------------------
# Finding weight matmuls


@dataclasses.dataclass
class _Weight:
    """A 2-D float32 weight: an initializer, or a constant expression of initializers (a streamed
    model's fused Q|K|V kernel is ``Concat(Reshape(q), Reshape(k), Reshape(v))``: nothing folds
    lazy weights), evaluated with numpy when the quantized parts are written."""

    name: str  # the first initializer it reads: what exclude/int8 patterns match
    sources: list[str]  # every initializer it reads
    shape: tuple[int, ...]
    load: Callable[[], np.ndarray]
    lazy: bool
    local: bool = False  # a constant of a function or control-flow body, not a main-graph initializer


#: ops a weight expression may contain: data movement, computed exactly by numpy
_EXPRESSION_OPS = frozenset({"Reshape", "Transpose", "Concat", "Squeeze", "Unsqueeze", "Identity"})


def _expression(v: ir.Value, sources: list[ir.Value], depth: int = 0) -> Callable[[], np.ndarray] | None:
    tensor = v.const_value
    node = v.producer()
    if tensor is None and node is not None and node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
        attr = node.attributes.get("value")
        tensor = attr.value if attr is not None and attr.type == ir.AttributeType.TENSOR else None
    if tensor is not None:
        sources.append(v)
        return lambda: np.asarray(tensor.numpy())
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


def _weight(v: ir.Value | None, main: ir.Graph | None = None, ndim: int | None = 2) -> _Weight | None:
    """The constant ``v`` (``ndim`` axes; None: any) as a weight, or None. ``main``: the model's
    main graph, whose initializers are the non-local sources (None: ``v`` is in it)."""
    if v is None or v.type is None or v.dtype != F32 or v.shape is None or (ndim is not None and len(v.shape) != ndim):
        return None
    if not all(isinstance(d, int) for d in v.shape):
        return None
    sources: list[ir.Value] = []
    load = _expression(v, sources)
    if load is None or not sources:
        return None
    lazy = any(isinstance(x.const_value, ir.LazyTensor) for x in sources)
    local = main is not None and any(main.initializers.get(x.name or "") is not x for x in sources)
    name = v.name if v.const_value is not None else (sources[0].name or "weight")
    return _Weight(name or "weight", [x.name or "" for x in sources], tuple(int(d) for d in v.shape), load, lazy, local)


@dataclasses.dataclass
class _WeightMatmul:
    node: ir.Node
    a: ir.Value
    weight: _Weight
    transposed: bool  # the weight is [N, K] (Gemm transB)
    bias: ir.Value | None  # a 1-D [N] addend (Gemm C)
    addend: ir.Value | None  # any other Gemm C, added after


def _attr(node: ir.Node, name: str, default: Any) -> Any:
    a = node.attributes.get(name)
    return default if a is None else a.value


def _find(node: ir.Node, main: ir.Graph) -> _WeightMatmul | None:
    if node.domain not in ("", "ai.onnx") or len(node.inputs) < 2 or node.op_type not in ("MatMul", "Gemm"):
        return None
    a = node.inputs[0]
    if a is None or a.type is None or a.dtype != F32:
        return None
    if a.shape is not None and len(a.shape) < 2:
        return None  # a vector times a matrix: MatMulNBits wants rows
    w = _weight(node.inputs[1], main)
    return None if w is None else _matmul_view(node, a, w)


def _matmul_view(node: ir.Node, a: ir.Value, w: _Weight) -> _WeightMatmul | None:
    """``node`` (MatMul/Gemm of ``a`` by ``w``; a stacked ``w`` is ``[L, K, N]``) as a weight matmul."""
    if node.op_type == "MatMul":
        return _WeightMatmul(node, a, w, False, None, None)
    if _attr(node, "transA", 0) or _attr(node, "alpha", 1.0) != 1.0:
        return None
    c = node.inputs[2] if len(node.inputs) > 2 else None
    if c is not None and _attr(node, "beta", 1.0) != 1.0:
        return None
    transposed = bool(_attr(node, "transB", 0))
    n = w.shape[-2 if transposed else -1]
    if c is not None and c.shape is not None and len(c.shape) == 1 and c.shape[0] == n and c.dtype == F32:
        return _WeightMatmul(node, a, w, transposed, c, None)
    return _WeightMatmul(node, a, w, transposed, None, c)


def _matches(name: str, patterns: Any) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


# ---------------------------------------------------------------------------------------------
# The rewrite

#: a constant added to activations is quantized (``conv="int8"``) from this many elements: below
#: it (biases, LayerNorm parameters) the bytes saved are noise
ADDEND_ELEMENTS = 16384
#: ops between the LM head and the graph output it writes
_TO_OUTPUT_OPS = frozenset({"Reshape", "Transpose", "Identity", "Squeeze", "Unsqueeze", "Cast", "Add"})


def _output_layers(graph: ir.Graph) -> set[int]:
    """ids of the MatMul/Gemm nodes whose result is a graph output (through reshapes, casts and a
    bias ``Add``): the layer whose every output value is read, an LM's head."""
    heads: set[int] = set()
    for out in graph.outputs:
        v: ir.Value | None = out
        for _ in range(16):
            node = v.producer() if v is not None else None
            if node is None or node.domain not in ("", "ai.onnx"):
                break
            if node.op_type in ("MatMul", "Gemm"):
                heads.add(id(node))
                break
            if node.op_type not in _TO_OUTPUT_OPS:
                break
            v = next((x for x in node.inputs if x is not None and x.const_value is None
                      and (x.producer() is None or x.producer().op_type != "Constant")), None)
    return heads


def quantize_weight_matmuls(model: ir.Model, p: Precision) -> QuantizeResult:
    main = model.graph
    names = FreshNames(model)
    graphs = list(all_graphs(model))
    sites: list[tuple[_Site, _WeightMatmul]] = []
    embeddings: list[_Site] = []
    convs: list[_Site] = []
    addends: list[tuple[_Site, int]] = []
    scans: list[_Site] = []
    selected: list[tuple[_Site, _WeightMatmul, list[ir.Node]]] = []
    for g in graphs:
        for node in g:
            site = _Site(node, g, main, names)
            m = _find(node, main)
            if m is not None:
                sites.append((site, m))
            elif (chosen := _selected_weight(node, main)) is not None:
                selected.append((site, *chosen))
            elif p.embedding_kind() is not None and _is_embedding(node, main):
                embeddings.append(site)
            elif p.conv == "int8" and _is_conv(node, main):
                convs.append(site)
            elif p.conv == "int8" and (k := _addend_slot(node, main)) is not None:
                addends.append((site, k))
            if node.op_type == "Scan" and node.domain in ("", "ai.onnx"):
                scans.append(site)
    has_embedding = any(_is_embedding(node, main) for g in graphs for node in g)
    heads = _output_layers(main) if p.kind == "int4" and p.lm_head == "int8" and has_embedding else set()
    result = QuantizeResult(p.kind)
    counter = [0]

    def bits_of(m: _WeightMatmul) -> int:
        if p.kind == "int8" or any(_matches(n, p.int8) for n in m.weight.sources) or id(m.node) in heads:
            return 8
        return 4

    for site, m in sites:
        name = m.weight.name
        if any(_matches(n, p.exclude) for n in m.weight.sources):
            result.excluded.append(name)
            continue
        counter[0] += 1
        if bits_of(m) == 4:
            _to_int4(site, m, p, counter[0])
            result.int4.append(name)
        else:
            _to_int8(site, m, p, counter[0])
            result.int8.append(name)
        _use_domain(site.owner)
    for site in scans:
        for label in _quantize_scanned_weights(site, p, counter):
            result.scanned.append(label)
            _use_domain(site.owner)
    for site, m, chain in selected:
        if any(_matches(n, p.exclude) for n in m.weight.sources):
            result.excluded.append(m.weight.name)
            continue
        counter[0] += 1
        result.selected.append(_quantize_selected_weight(site, m, chain, p, counter[0]))
    for site in embeddings:
        table = _weight(site.node.inputs[0], main)
        if any(_matches(n, p.exclude) for n in table.sources):
            result.excluded.append(table.name)
            continue
        counter[0] += 1
        if p.embedding_kind() == "int4" and table.shape[1] % p.block_size == 0:
            _embedding_int4(site, table, p, counter[0])
            result.embeddings4.append(table.name)
        else:
            _embedding_int8(site, table, counter[0])
            result.embeddings.append(table.name)
    for site in convs:
        kernel = _weight(site.node.inputs[1], main, ndim=None)
        if any(_matches(n, p.exclude) for n in kernel.sources):
            result.excluded.append(kernel.name)
            continue
        _dequantized_input(site, 1, kernel, axis=0)
        result.convs.append(kernel.name)
    for site, k in addends:
        const = _weight(site.node.inputs[k], main, ndim=None)
        if any(_matches(n, p.exclude) for n in const.sources):
            result.excluded.append(const.name)
            continue
        _dequantized_input(site, k, const, axis=len(const.shape) - 1)
        result.addends.append(const.name)
    if not (result.int4 or result.int8 or result.embeddings or result.embeddings4 or result.convs or result.scanned
            or result.selected):
        if result.excluded:
            raise PrecisionError(f"precision={p.kind!r}: exclude={list(p.exclude)!r} excludes every weight matmul of this "
                                 "model, so nothing would be quantized; narrow the patterns")
        low = any(node.op_type in ("MatMul", "Gemm") and any(
            v is not None and v.type is not None and v.dtype in (ir.DataType.FLOAT16, ir.DataType.BFLOAT16)
            for v in (*node.inputs, *(x for i in node.inputs if i is not None and i.producer() is not None
                                       for x in i.producer().inputs)))
            for g in graphs for node in g)
        why = ("its matmuls compute in float16/bfloat16 as traced (flax dtype=, a Keras mixed policy): export it as "
               "traced with precision='float32'" if low else
               "export it with precision='float16' or 'bfloat16' to make it smaller")
        raise PrecisionError(f"precision={p.kind!r} quantizes weight matmuls and convolutions (MatMul/Gemm/Conv with a "
                             f"constant float32 weight), and this model has none; {why}")
    if result.int4 or result.int8 or result.embeddings or result.embeddings4 or result.scanned or result.selected:
        model.opset_imports.setdefault(MS_DOMAIN, 1)
    return result


def _use_domain(owner: ir.Graph | ir.Function) -> None:
    if isinstance(owner, ir.Function):  # a function body imports the opsets its nodes use
        owner.opset_imports.setdefault(MS_DOMAIN, 1)


def _kn(m: _WeightMatmul) -> tuple[int, int]:
    rows, cols = m.weight.shape[-2:]  # a stacked weight's one layer
    return (cols, rows) if m.transposed else (rows, cols)


def _oriented(m: _WeightMatmul, fn: Callable[[np.ndarray], tuple[np.ndarray, ...]]) -> Callable[[np.ndarray], tuple[np.ndarray, ...]]:
    """``fn`` applied to the weight as ``[K, N]``."""
    return (lambda w: fn(np.ascontiguousarray(w.T))) if m.transposed else fn


def _replace(site: _Site, m: _WeightMatmul, nodes: list[ir.Node], out: ir.Value) -> None:
    if m.addend is not None:
        add = ir.Node("", "Add", [out, m.addend], outputs=[ir.Value(name=site.names(f"{out.name}_c"))],
                      name=f"{out.name}_add")
        nodes.append(add)
        out = add.outputs[0]
    old = m.node.outputs[0]
    out.type, out.shape = old.type, old.shape
    ir.convenience.replace_nodes_and_values(site.owner, m.node, [m.node], nodes, [old], [out])


def _int4_specs(K: int, N: int, p: Precision) -> list[tuple[str, ir.DataType, tuple[int, ...]]]:
    blocks = -(-K // p.block_size)
    specs = [("q4", ir.DataType.UINT8, (N, blocks, p.block_size // 2)), ("scales", F32, (N, blocks))]
    if not p.symmetric:
        specs.append(("zero_points", ir.DataType.UINT8, (N, -(-blocks // 2))))
    return specs


def _matmul_nbits(a: ir.Value, parts: list[ir.Value], bias: ir.Value | None, K: int, N: int, p: Precision,
                  name: str) -> ir.Node:
    inputs: list[ir.Value | None] = [a, *parts]
    if bias is not None:
        inputs += [None] * (5 - len(inputs)) + [bias]
    attrs = [ir.AttrInt64("K", K), ir.AttrInt64("N", N), ir.AttrInt64("bits", 4), ir.AttrInt64("block_size", p.block_size)]
    if p.accuracy_level is not None:
        attrs.append(ir.AttrInt64("accuracy_level", p.accuracy_level))
    return ir.Node(MS_DOMAIN, "MatMulNBits", inputs, attrs, outputs=[ir.Value(name=name)], name=name)


def _to_int4(site: _Site, m: _WeightMatmul, p: Precision, k: int) -> None:
    K, N = _kn(m)
    specs = _int4_specs(K, N, p)
    fn = _oriented(m, functools.partial(int4_blocks, block_size=p.block_size, symmetric=p.symmetric))
    parts = _part_values(site, m.weight, lambda w: fn(w)[: len(specs)], specs)
    node = _matmul_nbits(m.a, parts, m.bias, K, N, p, site.names(f"matmul_q4_{k}"))
    _replace(site, m, [node], node.outputs[0])


def _dynamic_int8(site: _Site, a: ir.Value, codes: ir.Value, scales: ir.Value, bias: ir.Value | None, p: Precision,
                  k: int) -> list[ir.Node]:
    """The int8 matmul of ``a`` and ``codes * scales`` (+ ``bias``): the nodes, the last writes it."""
    if p.int8_kernel == "DynamicQuantizeMatMul":
        inputs: list[ir.Value | None] = [a, codes, scales]
        if bias is not None:
            inputs += [None, bias]
        name = site.names(f"matmul_q8_{k}")
        return [ir.Node(MS_DOMAIN, "DynamicQuantizeMatMul", inputs, outputs=[ir.Value(name=name)], name=name)]

    def v(name: str, dtype: ir.DataType | None = None) -> ir.Value:
        return ir.Value(name=site.names(f"{name}_{k}"), type=ir.TensorType(dtype) if dtype is not None else None)

    quant = ir.Node("", "DynamicQuantizeLinear", [a], outputs=[v("a_q8", ir.DataType.UINT8), v("a_scale", F32),
                                                                v("a_zero_point", ir.DataType.UINT8)], name=f"a_q8_{k}")
    q, a_scale, a_zp = quant.outputs
    mm = ir.Node("", "MatMulInteger", [q, codes, a_zp], outputs=[v("matmul_i32", ir.DataType.INT32)], name=f"matmul_i32_{k}")
    to_float = ir.Node("", "Cast", [mm.outputs[0]], [ir.AttrInt64("to", int(F32))], outputs=[v("matmul_f32", F32)],
                       name=f"matmul_f32_{k}")
    scale = ir.Node("", "Mul", [a_scale, scales], outputs=[v("matmul_scale", F32)], name=f"matmul_scale_{k}")
    out = ir.Node("", "Mul", [to_float.outputs[0], scale.outputs[0]], outputs=[v("matmul_q8", F32)], name=f"matmul_q8_{k}")
    nodes = [quant, mm, to_float, scale, out]
    if bias is not None:
        nodes.append(ir.Node("", "Add", [out.outputs[0], bias], outputs=[v("matmul_q8_bias", F32)], name=f"matmul_q8_bias_{k}"))
    return nodes


def _to_int8(site: _Site, m: _WeightMatmul, p: Precision, k: int) -> None:
    K, N = _kn(m)
    codes, scales = _part_values(site, m.weight, _oriented(m, int8_per_column),
                                 [("q8", ir.DataType.INT8, (K, N)), ("scales", F32, (N,))])
    nodes = _dynamic_int8(site, m.a, codes, scales, m.bias, p, k)
    _replace(site, m, nodes, nodes[-1].outputs[0])


def _is_embedding(node: ir.Node, main: ir.Graph) -> bool:
    return (node.op_type == "Gather" and node.domain in ("", "ai.onnx") and _attr(node, "axis", 0) == 0
            and _weight(node.inputs[0], main) is not None)


def _embedding_int8(site: _Site, table: _Weight, k: int) -> None:
    node = site.node
    ids = node.inputs[1]
    V, D = table.shape

    def rows(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        codes, scale = int8_per_column(w, axis=1)
        return codes, scale.reshape(V, 1)

    codes, scales = _part_values(site, table, rows, [("q8", ir.DataType.INT8, (V, D)), ("scales", F32, (V, 1))])

    def v(base: str) -> ir.Value:
        return ir.Value(name=site.names(f"{base}_{k}"))

    g_codes = ir.Node("", "Gather", [codes, ids], outputs=[v("embedding_q8")], name=f"embedding_q8_{k}")
    g_scale = ir.Node("", "Gather", [scales, ids], outputs=[v("embedding_scale")], name=f"embedding_scale_{k}")
    to_float = ir.Node("", "Cast", [g_codes.outputs[0]], [ir.AttrInt64("to", int(F32))],
                       outputs=[v("embedding_f32")], name=f"embedding_f32_{k}")
    out = ir.Node("", "Mul", [to_float.outputs[0], g_scale.outputs[0]], outputs=[v("embedding")], name=f"embedding_{k}")
    old = node.outputs[0]
    new = out.outputs[0]
    new.type, new.shape = old.type, old.shape
    ir.convenience.replace_nodes_and_values(site.owner, node, [node], [g_codes, g_scale, to_float, out], [old], [new])


def _embedding_int4(site: _Site, table: _Weight, p: Precision, k: int) -> None:
    """int4 tables: ``com.microsoft.GatherBlockQuantized`` over 4-bit rows, blocks of
    ``block_size`` along each row with a scale and a zero point each (the MatMulNBits layout of the
    transposed table: ``[V, D/2]`` bytes, ``[V, D/block]`` scales)."""
    node = site.node
    V, D = table.shape
    blocks = D // p.block_size

    def rows(w: np.ndarray) -> tuple[np.ndarray, ...]:
        q, scales, zero_points = int4_blocks(np.ascontiguousarray(w.T), p.block_size, False)
        return q.reshape(V, D // 2), scales.reshape(V, blocks), zero_points

    parts = _part_values(site, table, rows, [("q4", ir.DataType.UINT8, (V, D // 2)), ("scales", F32, (V, blocks)),
                                             ("zero_points", ir.DataType.UINT8, (V, -(-blocks // 2)))])
    out = ir.Value(name=site.names(f"embedding_q4_{k}"))
    gather = ir.Node(MS_DOMAIN, "GatherBlockQuantized", [parts[0], node.inputs[1], parts[1], parts[2]],
                     [ir.AttrInt64("gather_axis", 0), ir.AttrInt64("quantize_axis", 1),
                      ir.AttrInt64("block_size", p.block_size), ir.AttrInt64("bits", 4)], outputs=[out], name=out.name)
    old = node.outputs[0]
    out.type, out.shape = old.type, old.shape
    ir.convenience.replace_nodes_and_values(site.owner, node, [node], [gather], [old], [out])


# ---------------------------------------------------------------------------------------------
# Convolutions and large addends: int8 storage, one DequantizeLinear


def _is_conv(node: ir.Node, main: ir.Graph) -> bool:
    if node.op_type != "Conv" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 2:
        return False
    w = _weight(node.inputs[1], main, ndim=None)
    return w is not None and len(w.shape) >= 3


def _addend_slot(node: ir.Node, main: ir.Graph) -> int | None:
    """The input slot of a large float32 constant this ``Add`` adds to an activation, or None."""
    if node.op_type != "Add" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 2:
        return None
    for k in (0, 1):
        other = node.inputs[1 - k]
        if other is None or _weight(other, main, ndim=None) is not None:
            continue
        v = node.inputs[k]
        if v is None or v.shape is None or len(v.shape) < 2 or not all(isinstance(d, int) for d in v.shape):
            continue
        if int(np.prod([int(d) for d in v.shape])) < ADDEND_ELEMENTS:
            continue
        w = _weight(v, main, ndim=None)
        if w is not None and (w.lazy or np.all(np.isfinite(w.load()))):  # a -inf mask stays float32
            return k
    return None


def int8_per_axis(w: np.ndarray, axis: int) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 codes and one float32 scale per entry of ``axis``."""
    w = np.asarray(w, dtype=np.float32)
    moved = np.moveaxis(w, axis, 0).reshape(w.shape[axis], -1)
    codes, scales = int8_per_column(moved.T)  # [rest, entries]: a scale per entry
    codes = np.moveaxis(codes.T.reshape(np.moveaxis(w, axis, 0).shape), 0, axis)
    return np.ascontiguousarray(codes), scales


def _dequantized_input(site: _Site, slot: int, w: _Weight, axis: int) -> None:
    """``site.node``'s input ``slot`` read from int8 codes and per-``axis`` scales through one
    ``DequantizeLinear``."""
    def quantize(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not np.all(np.isfinite(arr)):  # a streamed constant is first seen here; int8 has no infinity
            raise PrecisionError(f"weight {w.name!r} holds inf or NaN, which int8 cannot store; leave it float32 with "
                                 f"exclude=[{w.name!r}] (or conv=None)")
        return int8_per_axis(arr, axis)

    codes, scales = _part_values(site, w, quantize, [("q8", ir.DataType.INT8, w.shape), ("scales", F32, (w.shape[axis],))])
    out = ir.Value(name=site.names(f"{w.name}_dequantized"), type=ir.TensorType(F32), shape=ir.Shape(list(w.shape)))
    dq = ir.Node("", "DequantizeLinear", [codes, scales], [ir.AttrInt64("axis", axis)], outputs=[out],
                 name=f"{out.name}_node")
    site.owner.insert_before(site.node, dq)
    site.node.replace_input_with(slot, out)


# ---------------------------------------------------------------------------------------------
# Weights a Scan slices per iteration (layers stacked on axis 0, scanned by lax.scan / nnx.scan)


def _quantize_scanned_weights(site: _Site, p: Precision, counter: list[int]) -> list[str]:
    """Each scanned input ``[L, K, N]`` of ``site.node`` (a Scan) whose slice the body reads only
    as a weight matmul's weight becomes stacked codes (in its slot) and stacked scales (and zero
    points), appended as scan inputs; the body's matmul reads the slices. Returns the weights done."""
    scan = site.node
    body = scan.attributes["body"].value
    n_scan = _attr(scan, "num_scan_inputs", 0)
    n_state = len(scan.inputs) - n_scan
    axes = list(_attr(scan, "scan_input_axes", None) or [0] * n_scan)
    directions = list(_attr(scan, "scan_input_directions", None) or [0] * n_scan)
    done: list[str] = []
    inputs = list(scan.inputs)  # the new Scan's: codes in the weights' slots, scales (zero points) appended
    for j in range(n_scan):
        slot = n_state + j
        if axes[j] != 0 or slot >= len(body.inputs):
            continue
        stacked = _weight(scan.inputs[slot], site.main, ndim=3)
        slice_ = body.inputs[slot]
        uses = list(slice_.uses())
        if stacked is None or len(uses) != 1 or any(_matches(n, p.exclude) for n in stacked.sources):
            continue
        user, i = uses[0]
        m = _scanned_matmul(user, i, stacked)
        if m is None:
            continue
        L = stacked.shape[0]
        counter[0] += 1
        bits, specs, parts = _stacked_parts(site, stacked, m, p)
        slices = []
        for q, (suffix, dtype, shape) in enumerate(specs):
            if q == 0:  # the codes take the float32 weight's slot; its slice is retyped
                inputs[slot] = parts[0]
                slice_.type, slice_.shape = ir.TensorType(dtype), ir.Shape(list(shape))
                slices.append(slice_)
                continue
            # a new scanned input: appended after the others, in the node and in the body
            inputs.append(parts[q])
            new = ir.Value(name=site.names(f"{slice_.name}_{suffix}"), type=ir.TensorType(dtype), shape=ir.Shape(list(shape)))
            body.inputs.append(new)
            axes.append(0)
            directions.append(directions[j])
            slices.append(new)
        n_scan += len(specs) - 1
        _layer_matmul(_Site(user, body, site.main, site.names), m, slices, bits, p, counter[0])
        done.append(f"{stacked.name} (int{bits}, {L} layers)")
    if done:  # a new Scan node (onnx_ir before 0.1.13 cannot add inputs to a node), same body
        attrs = {**scan.attributes, "num_scan_inputs": ir.AttrInt64("num_scan_inputs", n_scan),
                 "scan_input_axes": ir.AttrInt64s("scan_input_axes", axes),
                 "scan_input_directions": ir.AttrInt64s("scan_input_directions", directions)}
        new = ir.Node(scan.domain, scan.op_type, inputs, list(attrs.values()), num_outputs=len(scan.outputs),
                      name=scan.name)
        for old_out, new_out in zip(scan.outputs, new.outputs):
            new_out.type, new_out.shape = old_out.type, old_out.shape
        ir.convenience.replace_nodes_and_values(site.owner, scan, [scan], [new], list(scan.outputs), list(new.outputs))
    return done


def _stacked_parts(site: _Site, stacked: _Weight, m: _WeightMatmul, p: Precision
                   ) -> tuple[int, list[tuple[str, ir.DataType, tuple[int, ...]]], list[ir.Value]]:
    """The quantized parts of a stacked ``[L, K, N]`` weight, each layer quantized on its own and
    the parts stacked on axis 0: (bits, one layer's part specs, the stacked part values)."""
    K, N = _kn(m)
    bits = 8 if p.kind == "int8" or any(_matches(n, p.int8) for n in stacked.sources) else 4
    if bits == 4:
        specs = _int4_specs(K, N, p)
        one = functools.partial(int4_blocks, block_size=p.block_size, symmetric=p.symmetric)
    else:
        specs = [("q8", ir.DataType.INT8, (K, N)), ("scales", F32, (N,))]
        one = int8_per_column

    def per_layer(w: np.ndarray, n: int = len(specs), t: bool = m.transposed) -> tuple[np.ndarray, ...]:
        layers = [one(np.ascontiguousarray(w[layer].T if t else w[layer]))[:n] for layer in range(w.shape[0])]
        return tuple(np.stack([parts[q] for parts in layers]) for q in range(n))

    stacked_specs = [(suffix, dtype, (stacked.shape[0], *shape)) for suffix, dtype, shape in specs]
    return bits, specs, _part_values(site, stacked, per_layer, stacked_specs)


def _layer_matmul(body_site: _Site, m: _WeightMatmul, slices: list[ir.Value], bits: int, p: Precision, k: int) -> None:
    """``m`` (in a body) replaced by the quantized matmul of one layer's parts ``slices``."""
    K, N = _kn(m)
    if bits == 4:
        nodes = [_matmul_nbits(m.a, slices, m.bias, K, N, p, body_site.names(f"matmul_q4_{k}"))]
    else:
        nodes = _dynamic_int8(body_site, m.a, slices[0], slices[1], m.bias, p, k)
    _replace(body_site, m, nodes, nodes[-1].outputs[0])
    _use_domain(body_site.owner)


def _scanned_matmul(node: ir.Node, i: int, stacked: _Weight) -> _WeightMatmul | None:
    """``node`` as a weight matmul whose weight (input ``i == 1``) is a slice of ``stacked``."""
    if i != 1 or node.domain not in ("", "ai.onnx") or node.op_type not in ("MatMul", "Gemm"):
        return None
    a = node.inputs[0]
    if a is None or a.type is None or a.dtype != F32 or (a.shape is not None and len(a.shape) < 2):
        return None
    return _matmul_view(node, a, stacked)


# ---------------------------------------------------------------------------------------------
# Weights a body selects by a run-time index (stacked layers read in a Loop / fori_loop body)


def _selected_weight(node: ir.Node, main: ir.Graph) -> tuple[_WeightMatmul, list[ir.Node]] | None:
    """``node`` (a MatMul/Gemm) whose weight is one layer of a stacked constant ``[L, K, N]``
    picked at run time, typically by a Loop's iteration number: ``Squeeze(Slice(stacked, i, i + 1,
    axes=[0]), [0])`` (``w[i]``, ``lax.dynamic_slice``) or ``Gather(stacked, i, axis=0)`` with a
    scalar ``i``. Returns the weight matmul (its weight the stacked one) and the selecting nodes.
    The stacked weight and the selected layer must have no other reader: a float32 copy kept for
    another reader would make the model larger, not smaller."""
    if node.domain not in ("", "ai.onnx") or node.op_type not in ("MatMul", "Gemm") or len(node.inputs) < 2:
        return None
    a, w = node.inputs[0], node.inputs[1]
    if a is None or a.type is None or a.dtype != F32 or (a.shape is not None and len(a.shape) < 2):
        return None
    if w is None or w.shape is None or len(w.shape) != 2 or len(list(w.uses())) != 1:
        return None
    select = w.producer()
    if select is None or select.domain not in ("", "ai.onnx"):
        return None
    if select.op_type == "Gather":
        index = select.inputs[1]
        if _attr(select, "axis", 0) != 0 or index is None or index.shape is None or len(index.shape) != 0:
            return None
        chain = [select]
    elif select.op_type == "Squeeze" and len(select.inputs) > 1 and constant_ints(select.inputs[1]) == [0]:
        layer = select.inputs[0]
        slice_ = layer.producer() if layer is not None else None
        if (slice_ is None or slice_.op_type != "Slice" or slice_.domain not in ("", "ai.onnx") or len(slice_.inputs) < 4
                or constant_ints(slice_.inputs[3]) != [0] or len(list(layer.uses())) != 1
                or layer.shape is None or layer.shape[0] != 1):
            return None
        if len(slice_.inputs) > 4 and slice_.inputs[4] is not None and constant_ints(slice_.inputs[4]) != [1]:
            return None
        chain = [slice_, select]
    else:
        return None
    source = chain[0].inputs[0]
    if source is None or len(list(source.uses())) != 1:
        return None
    stacked = _weight(source, main, ndim=3)
    m = _matmul_view(node, a, stacked) if stacked is not None else None
    return None if m is None else (m, chain)


def _quantize_selected_weight(site: _Site, m: _WeightMatmul, chain: list[ir.Node], p: Precision, k: int) -> str:
    """The stacked weight ``m`` reads one layer of becomes stacked codes and scales (and zero
    points), each selected in the body the way the weight was (the same index values), and the
    matmul reads the selected parts."""
    bits, specs, parts = _stacked_parts(site, m.weight, m, p)
    slices = []
    for part, (suffix, dtype, shape) in zip(parts, specs):
        name = site.names(f"{m.node.inputs[1].name}_{suffix}")
        out = ir.Value(name=name, type=ir.TensorType(dtype), shape=ir.Shape(list(shape)))
        if chain[0].op_type == "Gather":
            nodes = [ir.Node("", "Gather", [part, chain[0].inputs[1]], [ir.AttrInt64("axis", 0)], outputs=[out],
                             name=f"{name}_gather")]
        else:
            slice_, squeeze = chain
            layer = ir.Value(name=site.names(f"{name}_layer"), type=ir.TensorType(dtype), shape=ir.Shape([1, *shape]))
            nodes = [ir.Node("", "Slice", [part, *slice_.inputs[1:]], outputs=[layer], name=f"{layer.name}_slice"),
                     ir.Node("", "Squeeze", [layer, squeeze.inputs[1]], outputs=[out], name=f"{name}_squeeze")]
        for node in nodes:
            site.owner.insert_before(site.node, node)
        slices.append(out)
    _layer_matmul(site, m, slices, bits, p, k)
    return f"{m.weight.name} (int{bits}, {m.weight.shape[0]} layers)"


__all__ = ["QuantizeResult", "int4_blocks", "int8_per_axis", "int8_per_column", "quantize_weight_matmuls"]

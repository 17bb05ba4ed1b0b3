"""Finding the weights a quantized export rewrites, and the initializers its quantized parts become.

A *weight* is a float32 constant: an initializer, a ``Constant`` of a function or control-flow
body, or a constant expression of initializers (data movement only, evaluated with numpy when the
parts are written). A *weight matmul* is a ``MatMul`` or ``Gemm`` reading one as its second operand
(see :mod:`.quantize` for the accepted forms). :func:`part_values` turns ``fn(weight)`` into the
values the rewritten nodes read, lazy when the weight is (streamed weights are read once, when
written).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir

from ..ir.graphs import FreshNames

F32 = ir.DataType.FLOAT


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


def part_values(site: Site, w: Weight, fn: Callable[[np.ndarray], tuple[np.ndarray, ...]],
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
class Site:
    """Where a rewrite happens: the node, the graph or function holding it, the main graph."""

    node: ir.Node
    owner: ir.Graph | ir.Function
    main: ir.Graph
    names: FreshNames


# ---------------------------------------------------------------------------------------------
# Finding weight matmuls


@dataclasses.dataclass
class Weight:
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
    axis = attribute_value(node, "axis", 0)
    perm = attribute_value(node, "perm", None)

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


def as_weight(v: ir.Value | None, main: ir.Graph | None = None, ndim: int | None = 2) -> Weight | None:
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
    return Weight(name or "weight", [x.name or "" for x in sources], tuple(int(d) for d in v.shape), load, lazy, local)


@dataclasses.dataclass
class WeightMatmul:
    node: ir.Node
    weight: Weight
    transposed: bool  # the weight is [N, K] (Gemm transB)
    bias: ir.Value | None  # a 1-D [N] addend (Gemm C)
    addend: ir.Value | None  # any other Gemm C, added after

    @property
    def a(self) -> ir.Value:
        """The activation input as the graph has it now: quantizing the matmul that computes it replaces
        that value (two weight matmuls in a row: OPT's project_out before its tied head), so a value
        kept from when the sites were found would name a node no longer in the graph."""
        return self.node.inputs[0]


def attribute_value(node: ir.Node, name: str, default: Any) -> Any:
    a = node.attributes.get(name)
    return default if a is None else a.value


def find_weight_matmul(node: ir.Node, main: ir.Graph) -> WeightMatmul | None:
    if node.domain not in ("", "ai.onnx") or len(node.inputs) < 2 or node.op_type not in ("MatMul", "Gemm"):
        return None
    a = node.inputs[0]
    if a is None or a.type is None or a.dtype != F32:
        return None
    if a.shape is not None and len(a.shape) < 2:
        return None  # a vector times a matrix: MatMulNBits wants rows
    w = as_weight(node.inputs[1], main)
    return None if w is None else matmul_view(node, w)


def matmul_view(node: ir.Node, w: Weight) -> WeightMatmul | None:
    """``node`` (MatMul/Gemm of its first input by ``w``; a stacked ``w`` is ``[L, K, N]``) as a weight matmul."""
    if node.op_type == "MatMul":
        return WeightMatmul(node, w, False, None, None)
    if attribute_value(node, "transA", 0) or attribute_value(node, "alpha", 1.0) != 1.0:
        return None
    c = node.inputs[2] if len(node.inputs) > 2 else None
    if c is not None and attribute_value(node, "beta", 1.0) != 1.0:
        return None
    transposed = bool(attribute_value(node, "transB", 0))
    n = w.shape[-2 if transposed else -1]
    if c is not None and c.shape is not None and len(c.shape) == 1 and c.shape[0] == n and c.dtype == F32:
        return WeightMatmul(node, w, transposed, c, None)
    return WeightMatmul(node, w, transposed, None, c)


def matches_any(name: str, patterns: Any) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


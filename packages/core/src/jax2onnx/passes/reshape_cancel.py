"""Reshapes that undo each other, and ``Shape`` reads that go around them.

A library layer splits heads as ``(batch, seq, heads·size) -> (batch, seq, heads, size)`` and a
fused op that takes the 3-D form (onnxruntime's ``GroupQueryAttention``, ``RotaryEmbedding``) flattens
them back, so every attention layer of an LLM decode step ran two to four Reshapes and the ``Shape``
reads of the split value that computed them: kernel launches that move no data, 7 % of a 125 M
int4 decode step's kernel time in onnxruntime's profiler (``bench/llamacpp_bench.py --profile``).

Rules (shape constants must be constants; ``allowzero`` Reshapes are left alone):

- ``Reshape(Reshape(x, s1), s2)`` reads ``x`` when ``s2`` (``s1`` may be computed) needs nothing from the middle value:
  its ``0`` entries (copy the input's dim) sit where the middle value and ``x`` have the same
  dim (both known: equal integers or the same symbol);
- ``Reshape(x, s)`` whose result has ``x``'s shape (same rank; every entry ``0``, ``x``'s own
  size, or one ``-1`` with every other entry so) goes: its readers read ``x``;
- ``Shape(Reshape(x, s), start, end)`` over entries of ``s`` that are all ``0`` reads ``x``'s dims
  (below opset 15, which has no ``start``/``end``, only where that is all of ``x``'s dims);
- in the main graph, ``Shape(v, start, end)`` over dims that are all named symbols reads a graph
  input holding the same symbols in the same order, so that one per model remains after
  duplicates merge (each layer asked its own value for the batch size).

A Reshape writing an output of the graph stays (the output keeps its name). Runs to a fixed point on every graph.
"""

from __future__ import annotations

import onnx_ir as ir

from ..ir.constants import constant_ints
from .manager import RewriteToFixedPoint, is_op


def _same_dim(a: object, b: object) -> bool:
    """Two dims known to be equal: equal integers, or the same named symbol."""
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, ir.SymbolicDim) and isinstance(b, ir.SymbolicDim):
        return a.value is not None and a.value == b.value
    return False


def _plain_reshape(node: ir.Node | None) -> bool:
    """A Reshape without ``allowzero`` (its ``0`` entries copy the input's dims)."""
    if not is_op(node, "Reshape") or len(node.inputs) < 2 or node.inputs[0] is None:
        return False
    allowzero = node.attributes.get("allowzero")
    return allowzero is None or not allowzero.value


def _target(node: ir.Node | None) -> list[int] | None:
    """A plain Reshape's constant target shape (None: not a constant, or not a plain Reshape)."""
    return constant_ints(node.inputs[1]) if _plain_reshape(node) else None


def _dims(v: ir.Value | None) -> list[object] | None:
    return None if v is None or v.shape is None else list(v.shape)


def _keeps_shape(x: ir.Value, target: list[int]) -> bool:
    """Whether Reshape(x, target) gives x's own shape (see the module doc)."""
    dims = _dims(x)
    if dims is None or len(dims) != len(target) or target.count(-1) > 1:
        return False
    for t, d in zip(target, dims):
        if t == -1 or t == 0:
            continue  # -1: every other entry matches, so the element count leaves it d
        if not (isinstance(d, int) and d == t):
            return False
    return True


def _shape_range(node: ir.Node, rank: int) -> tuple[int, int]:
    """A Shape node's [start, end) in a value of ``rank``, clamped as the op does."""
    def attr(name: str, default: int) -> int:
        a = node.attributes.get(name)
        return default if a is None else int(a.value)

    def clamp(i: int) -> int:
        return min(max(i + rank if i < 0 else i, 0), rank)

    return clamp(attr("start", 0)), clamp(attr("end", rank))


def _read_shape_of(node: ir.Node, source: ir.Value, start: int, end: int, rank: int, *, ranged: bool) -> bool:
    """``node`` (a Shape) reads dims [start, end) of ``source`` (of ``rank``) instead; without
    ``ranged`` (opset < 15) only when that is all of them."""
    whole = start == 0 and end == rank
    if not (ranged or whole):
        return False
    node.replace_input_with(0, source)
    for name in ("start", "end"):
        node.attributes.pop(name, None)
    if not whole:
        node.attributes["start"] = ir.AttrInt64("start", start)
        node.attributes["end"] = ir.AttrInt64("end", end)
    return True


class ReshapeCancelPass(RewriteToFixedPoint):
    # No shape inference of its own (a round trip of the whole model, on every export): the shapes
    # the lowering gave its values (JAX's, symbols named) are what the rules compare; a value
    # without one is left as it is.
    keeps_shapes = True  # every value it makes a reader read has the shape the old one had

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        # Shape's start/end exist from opset 15: below it a Shape read is moved only where it
        # reads the whole shape of its new input
        self._ranged_shape = int(model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))) >= 15
        self._sources: dict[int, dict] = {}  # per graph: its inputs do not change during the pass
        return super().call(model)

    def rewrite_once(self, graph: ir.Graph | ir.Function) -> bool:
        if id(graph) not in self._sources:
            self._sources[id(graph)] = self._symbol_sources(graph) if isinstance(graph, ir.Graph) else {}
        sources = self._sources[id(graph)]
        for node in list(graph):
            if _target(node) is not None and (self._skip_middle(node) or self._drop_identity(graph, node)):
                return True
            if is_op(node, "Shape") and node.inputs and node.inputs[0] is not None \
                    and (self._shape_past_reshape(node) or self._shape_from_input(node, sources)):
                return True
        return False

    @staticmethod
    def _skip_middle(node: ir.Node) -> bool:
        middle = node.inputs[0]
        inner = middle.producer()
        if not _plain_reshape(inner):  # its target may be computed: only the outer one's entries matter
            return False
        x = inner.inputs[0]
        target = _target(node)
        zeros = [i for i, t in enumerate(target) if t == 0]
        if zeros:
            mid, under = _dims(middle), _dims(x)
            if mid is None or under is None or any(i >= len(mid) or i >= len(under) or not _same_dim(mid[i], under[i])
                                                   for i in zeros):
                return False
        node.replace_input_with(0, x)
        return True

    @staticmethod
    def _drop_identity(graph: ir.Graph | ir.Function, node: ir.Node) -> bool:
        x, out = node.inputs[0], node.outputs[0]
        if not _keeps_shape(x, _target(node)) or out in graph.outputs:
            return False
        ir.convenience.replace_all_uses_with(out, x)
        graph.remove(node, safe=True)
        return True

    def _shape_past_reshape(self, node: ir.Node) -> bool:
        reshape = node.inputs[0].producer()
        target = None if reshape is None else _target(reshape)
        x = None if target is None else reshape.inputs[0]
        under = _dims(x)
        if under is None:
            return False
        start, end = _shape_range(node, len(target))
        if start >= end or end > len(under) or any(target[i] != 0 for i in range(start, end)):
            return False
        return _read_shape_of(node, x, start, end, len(under), ranged=self._ranged_shape)

    @staticmethod
    def _symbol_sources(graph: ir.Graph) -> dict[tuple[str, ...], tuple[ir.Value, int]]:
        """Each run of named symbols in a graph input's dims -> (the first input holding it, where)."""
        found: dict[tuple[str, ...], tuple[ir.Value, int]] = {}
        for v in graph.inputs:
            dims = _dims(v) or []
            for i in range(len(dims)):
                for j in range(i + 1, len(dims) + 1):
                    run = dims[i:j]
                    if not all(isinstance(d, ir.SymbolicDim) and d.value for d in run):
                        break
                    found.setdefault(tuple(d.value for d in run), (v, i))
        for v in graph.inputs:  # an input that is the run whole is read without start/end (any opset)
            dims = _dims(v) or []
            if dims and all(isinstance(d, ir.SymbolicDim) and d.value for d in dims):
                found[tuple(d.value for d in dims)] = (v, 0)
        return found

    def _shape_from_input(self, node: ir.Node, sources: dict[tuple[str, ...], tuple[ir.Value, int]]) -> bool:
        v = node.inputs[0]
        dims = _dims(v)
        if dims is None or not sources:
            return False
        start, end = _shape_range(node, len(dims))
        run = dims[start:end]
        if not run or not all(isinstance(d, ir.SymbolicDim) and d.value for d in run):
            return False
        source = sources.get(tuple(d.value for d in run))
        if source is None or source[0] is v:
            return False
        return _read_shape_of(node, source[0], source[1], source[1] + len(run), len(_dims(source[0])),
                              ranged=self._ranged_shape)

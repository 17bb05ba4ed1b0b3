"""Merge and cancel ``Transpose`` chains, also across layout-agnostic elementwise ops.

Channels-last models lower each Conv/pool/norm with a layout Transpose at each side, so consecutive
layers meet as ``Transpose(back) → [Relu …] → Transpose(forth)``. This pass removes such pairs.

Rules:
- ``Transpose(q)`` reading ``Transpose(p)`` becomes one ``Transpose`` with the composed permutation,
  or disappears (its readers read the source) when the composition is the identity; the inner
  Transpose stays while something else reads it;
- ``Transpose(q)`` reading a chain of elementwise ops (each read only by the next), whose top op
  reads only ``Transpose(p)`` values with ``p`` then ``q`` the identity and size-1 constants
  (which broadcast the same in any layout), while the ops below it have one such non-constant
  input: the chain computes in the untransposed layout and both Transposes go (never adds one);
- a Transpose producing an output of its graph keeps the output's name: it merges with a Transpose
  it reads into one, and when the two cancel, the value under them becomes the output under that
  name (so ``outputs_as_nchw`` after a channels-first op costs nothing); it stays when that value
  is a graph input or initializer (whose name is the graph's interface) or already an output.
Runs to a fixed point on every graph (function and control-flow bodies included).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import onnx_ir as ir

from ..ir.constants import is_size_one_constant, rank
from .manager import RewriteToFixedPoint

#: Ops computed element by element (after broadcasting), so they commute with a Transpose.
ELEMENTWISE = frozenset({
    "Abs", "Acos", "Acosh", "Add", "And", "Asin", "Asinh", "Atan", "Atanh", "BitwiseAnd", "BitwiseNot",
    "BitwiseOr", "BitwiseXor", "Cast", "Ceil", "Celu", "Clip", "Cos", "Cosh", "Div", "Elu", "Equal", "Erf",
    "Exp", "Floor", "Gelu", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish", "Identity", "IsInf",
    "IsNaN", "LeakyRelu", "Less", "LessOrEqual", "Log", "Max", "Min", "Mish", "Mod", "Mul", "Neg", "Not",
    "Or", "Pow", "Reciprocal", "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus",
    "Softsign", "Sqrt", "Sub", "Sum", "Tan", "Tanh", "ThresholdedRelu", "Where", "Xor",
})


def _perm(node: ir.Node, rank: int | None) -> list[int] | None:
    attr = node.attributes.get("perm")
    if attr is not None:
        return [int(p) for p in attr.value]
    return None if rank is None else list(range(rank))[::-1]  # ONNX default: reverse the axes


def _is_transpose(node: ir.Node | None) -> bool:
    return node is not None and node.op_type == "Transpose" and node.domain in ("", "ai.onnx")


def _compose(inner: Sequence[int], outer: Sequence[int]) -> list[int]:
    """The permutation of ``Transpose(outer)(Transpose(inner)(x))``."""
    return [int(inner[i]) for i in outer]


def _is_identity(perm: Sequence[int]) -> bool:
    return list(perm) == list(range(len(perm)))


class TransposeCancelPass(RewriteToFixedPoint):
    def rewrite_once(self, graph: ir.Graph | ir.Function) -> bool:
        outputs = {id(v) for v in graph.outputs}
        for node in list(graph):
            if not _is_transpose(node) or node.inputs[0] is None:
                continue
            if id(node.outputs[0]) in outputs:
                if self._merge_pair_at_output(graph, node, outputs):
                    return True
                continue
            if self._merge_pair(graph, node) or self._through_elementwise(graph, node, outputs):
                return True
        return False

    @staticmethod
    def _after_transpose(node: ir.Node) -> tuple[ir.Node, list[int]] | None:
        """(the Transpose ``node`` reads, the one perm doing both) when ``node`` reads a Transpose."""
        src = node.inputs[0]
        inner = src.producer()
        if not _is_transpose(inner) or inner.inputs[0] is None:
            return None
        p = _perm(inner, rank(inner.inputs[0]))
        q = _perm(node, rank(src))
        if p is None or q is None or len(p) != len(q):
            return None
        return inner, _compose(p, q)

    @staticmethod
    def _read_past(node: ir.Node, inner: ir.Node, composed: list[int]) -> None:
        """One Transpose instead of two: ``node`` reads ``inner``'s input and keeps its own output."""
        node.replace_input_with(0, inner.inputs[0])
        node.attributes["perm"] = ir.AttrInt64s("perm", composed)

    @staticmethod
    def _merge_pair_at_output(graph: ir.Graph | ir.Function, node: ir.Node, outputs: set[int]) -> bool:
        pair = TransposeCancelPass._after_transpose(node)
        if pair is None:
            return False
        inner, composed = pair
        if not _is_identity(composed):
            TransposeCancelPass._read_past(node, inner, composed)
            return True
        source = inner.inputs[0]
        if source.producer() is None or source.is_graph_input() or id(source) in outputs:
            return False
        out = node.outputs[0]
        name = out.name
        if source.type is None:
            source.type = out.type
        if source.shape is None:
            source.shape = out.shape
        for i, v in enumerate(graph.outputs):
            if v is out:
                graph.outputs[i] = source
        ir.convenience.replace_all_uses_with(out, source)
        graph.remove(node, safe=True)
        source.name = name
        return True

    @staticmethod
    def _merge_pair(graph: ir.Graph | ir.Function, node: ir.Node) -> bool:
        pair = TransposeCancelPass._after_transpose(node)
        if pair is None:
            return False
        inner, composed = pair
        if _is_identity(composed):
            ir.convenience.replace_all_uses_with(node.outputs[0], inner.inputs[0])
            graph.remove(node, safe=True)
        else:
            TransposeCancelPass._read_past(node, inner, composed)
        return True

    @staticmethod
    def _through_elementwise(graph: ir.Graph | ir.Function, node: ir.Node, outputs: set[int]) -> bool:
        q = _perm(node, rank(node.inputs[0]))
        if q is None:
            return False
        found = elementwise_chain(node.inputs[0], outputs, lambda u: _undoes(u, q))
        if found is None:
            return False
        chain, undone = found
        for i, u in undone:
            chain[-1].replace_input_with(i, u.producer().inputs[0])
        # Every op of the chain now computes in the layout the Transpose produced.
        for op in chain:
            out = op.outputs[0]
            out.shape = None if out.shape is None else ir.Shape([out.shape[i] for i in q])
        ir.convenience.replace_all_uses_with(node.outputs[0], chain[0].outputs[0])
        graph.remove(node, safe=True)
        return True


def elementwise_chain(
    start: ir.Value, outputs: set[int], undoes: Callable[[ir.Value], bool]
) -> tuple[list[ir.Node], list[tuple[int, ir.Value]]] | None:
    """The elementwise ops above ``start`` (each read only by the next, none a graph output), from
    ``start``'s producer upward, whose top op reads only values ``undoes`` accepts and size-1
    constants, while the ops below it have one non-constant input each: (the chain, the top op's
    (input index, value) pairs ``undoes`` accepted); None when there is no such chain. Shared by
    the passes that move a layout op (Transpose, Squeeze) through elementwise math."""
    chain: list[ir.Node] = []
    v = start
    while True:
        op = v.producer()
        if op is None or op.op_type not in ELEMENTWISE or op.domain not in ("", "ai.onnx"):
            return None
        if len(op.outputs) != 1 or len(v.uses()) != 1 or id(v) in outputs:
            return None
        chain.append(op)
        data = [(i, u) for i, u in enumerate(op.inputs) if u is not None and not is_size_one_constant(u)]
        undone = [(i, u) for i, u in data if undoes(u)]
        if data and len(undone) == len(data):
            return chain, undone
        if len(data) == 1 and not undone:
            v = data[0][1]
            continue
        return None


def _undoes(v: ir.Value, q: Sequence[int]) -> bool:
    """``v`` is a Transpose whose permutation ``q`` inverts."""
    prod = v.producer()
    if not _is_transpose(prod) or prod.inputs[0] is None:
        return False
    p = _perm(prod, rank(prod.inputs[0]))
    return p is not None and len(p) == len(q) and _is_identity(_compose(p, q))

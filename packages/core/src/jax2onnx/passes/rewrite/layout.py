"""Layout Transposes sunk through elementwise ops, so that pairs meet and cancel.

Channels-last Flax convolutions lower as ``Transpose → Conv → Transpose``; between two of them the
activation runs channels-last. Where the activation's value feeds two branches (Hugging Face's
Flax RegNet: squeeze-and-excitation multiplies the block's activation by a gate computed from it),
the pairs are not a single chain, and transpose cancelling (which needs each value read by the
next op alone) leaves four Transposes per block.

Rule: an elementwise op whose non-constant inputs are all ``Transpose(p)`` values (one ``p``), each
read by this op alone, computes on the untransposed values and one ``Transpose(p)`` follows it;
size-1 constants broadcast the same in any layout. Never adds a node (k Transposes become one).
After each round :class:`~jax2onnx.passes.transpose_cancel.TransposeCancelPass` removes the pairs
that now meet; to a fixed point.
"""

from __future__ import annotations

import onnx_ir as ir

from ...ir.constants import is_size_one_constant
from ..manager import all_graphs, replace_value
from ..pipeline import PassPipeline
from ..rules import Rule, RuleFamily, miss, no_match, value_label
from ..transpose_cancel import ELEMENTWISE, TransposeCancelPass


def _perm_of(node: ir.Node) -> tuple[int, ...] | None:
    attr = node.attributes.get("perm")
    return None if attr is None else tuple(attr.value)


class SinkTransposes(RuleFamily):
    name = "layout"
    start_ops = frozenset({"Transpose"})

    def run(self, model: ir.Model, counts: dict[str, int]) -> bool:
        if not any(n.op_type == "Transpose" for g in all_graphs(model) for n in g):
            return False
        modified = False
        (rule,) = self.rules()
        while self.run_rule(rule, all_graphs(model), counts):
            modified = True
            # a sunk Transpose meeting its inverse cancels; the value under them then has one
            # reader fewer (once the cancelled pair is removed as dead code), which may let the
            # next op's inputs sink in turn
            PassPipeline([TransposeCancelPass()], finish_dead_code=True, dead_code=True)(model)
        return modified

    def __init__(self, opset: int = 0) -> None:
        super().__init__(opset)
        self._made = 0  # numbers the new nodes' names (the op's own name may be empty)

    def rules(self) -> list[Rule]:
        return [Rule("transpose_sink", ELEMENTWISE, self._match, self._sink)]

    @staticmethod
    def _match(graph, node: ir.Node):
        if len(node.outputs) != 1:
            return no_match("not a one-output elementwise op")
        out = node.outputs[0]
        if out in graph.outputs:
            return no_match("its value is a graph output")
        perm, sources = None, []
        for v in node.inputs:
            if v is None or is_size_one_constant(v):
                sources.append(v)
                continue
            t = v.producer()
            if t is None or t.op_type != "Transpose" or t.domain not in ("", "ai.onnx") or v in graph.outputs:
                return no_match("an input is neither a Transpose nor a size-1 constant")
            p = _perm_of(t)
            if p is None or (perm is not None and p != perm):
                return miss("its inputs are Transposes of different permutations")
            if any(user is not node for user, _ in v.uses()):
                return miss(f"the Transpose {value_label(v)} has other readers")
            perm = p
            sources.append(t.inputs[0])
        if perm is None:
            return no_match("no input is a Transpose")
        return perm, sources

    def _sink(self, graph, node: ir.Node, found) -> None:
        perm, sources = found
        out = node.outputs[0]
        self._made += 1
        stem = f"{node.name or node.op_type}_sunk{self._made}"
        inner = ir.Node("", node.op_type, sources, list(node.attributes.values()), name=f"{stem}_untransposed")
        inner.outputs[0].name, inner.outputs[0].type = f"{out.name or 'v'}_{stem}", out.type
        back = ir.Node("", "Transpose", [inner.outputs[0]], [ir.AttrInt64s("perm", list(perm))],
                       name=f"{stem}_transpose")
        back.outputs[0].type, back.outputs[0].shape = out.type, out.shape
        graph.insert_before(node, [inner, back])
        name = out.name
        replace_value(graph, out, back.outputs[0])
        graph.remove(node, safe=True)
        back.outputs[0].name = name

"""Constants broadcast to a runtime shape: compute on the constants, broadcast once.

With a symbolic batch, code such as ``jnp.ones((batch, seq))`` or a causal mask broadcast to
``(batch, 1, seq, seq)`` becomes ``Expand(constant, Concat(Shape(x)[0], ...))``, and every
elementwise op after it (the mask's ``!=``, ``&``, ``where``, casts: Hugging Face's GPT-2 writes
about thirty of them) runs on batch-sized tensors instead of folding away as it does for a static
batch. Rule: an elementwise op whose inputs are constants or ``Expand``s of constants to one shape
value ``S`` becomes ``Expand(op(constants...), S)``; constant folding then evaluates the op, and the
rule applies again to its readers. Exact: broadcasting is associative, so
``op(broadcast(a, S), b) == broadcast(op(a, b), S)`` elementwise, with the same result shape.
"""

from __future__ import annotations

import onnx_ir as ir

from ...ir.constants import constant_tensor
from ..constant_folding import ConstantFoldingPass
from ..rules import Rule, RuleFamily, miss, no_match
from .elementwise import ELEMENTWISE_OPS


def _expanded_constant(v: ir.Value | None) -> tuple[ir.Value, ir.Value] | None:
    """(the constant, the shape value) when ``v = Expand(constant, shape)``."""
    node = None if v is None else v.producer()
    if node is None or node.op_type != "Expand" or node.domain not in ("", "ai.onnx"):
        return None
    data, shape = node.inputs
    if data is None or shape is None or constant_tensor(data) is None:
        return None
    return data, shape


class BroadcastConstants(RuleFamily):
    name = "broadcast"
    #: the Expand of a constant an elementwise op reads
    start_ops = frozenset({"Expand"})

    scope = "main"  # folding works on the main graph, where the batch-shaped masks are

    def run(self, model: ir.Model, counts: dict[str, int]) -> bool:
        modified = False
        while True:
            changed = self.run_rule(self.rules()[0], self.graphs_of(model), counts)
            if not changed:
                return modified
            modified = True
            # the ops now on constants are evaluated (part of the rule: the next round hoists through them)
            ConstantFoldingPass()(model)

    def rules(self) -> list[Rule]:
        return [Rule("expand_hoist", ELEMENTWISE_OPS, self._match, self._hoist)]

    @staticmethod
    def _match(graph: ir.Graph, node: ir.Node):
        if len(node.outputs) != 1:
            return no_match("not a one-output elementwise op")
        shape = None
        inputs = []
        for v in node.inputs:
            if v is None or constant_tensor(v) is not None:
                inputs.append(v)
                continue
            found = _expanded_constant(v)
            if found is None:
                return no_match("an input is neither a constant nor an Expand of one")
            if shape is not None and found[1] is not shape:
                return miss("its inputs are constants expanded to different shape values")
            inputs.append(found[0])
            shape = found[1]
        if shape is None:
            return no_match("all its inputs are constants: constant folding's job")
        return inputs, shape

    @staticmethod
    def _hoist(graph: ir.Graph, node: ir.Node, found) -> None:
        inputs, shape = found
        out = node.outputs[0]
        inner = ir.Node("", node.op_type, inputs, list(node.attributes.values()), name=f"{node.name or 'op'}_on_constants")
        inner.outputs[0].name = f"{out.name or 'v'}_on_constants"
        inner.outputs[0].type = out.type
        expand = ir.Node("", "Expand", [inner.outputs[0], shape], name=f"{node.name or 'op'}_expand")
        new = expand.outputs[0]
        new.type, new.shape = out.type, out.shape
        graph.insert_before(node, [inner, expand])
        for i, v in enumerate(graph.outputs):
            if v is out:
                graph.outputs[i] = new
        name, out.name = out.name, None
        ir.convenience.replace_all_uses_with(out, new)
        new.name = name
        graph.remove(node, safe=True)

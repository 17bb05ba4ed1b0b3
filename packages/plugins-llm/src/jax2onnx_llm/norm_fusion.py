"""``target="onnxruntime"``: RMS norms as onnxruntime's LLM norm ops (domain ``com.microsoft``).

The decoders' ``RMSNormalization`` nodes (opset 23; NNX ``RMSNorm`` lowers to one) become

- ``SkipSimplifiedLayerNormalization(a, b, scale)`` when the norm reads a residual sum ``a + b`` of
  two same-shaped ``(batch, sequence, hidden)`` values: the op adds and normalizes in one kernel
  and hands the sum on through its fourth output, which replaces the ``Add`` for its other readers
  (the residual stream of a pre-norm decoder);
- a norm of anything else stays ``RMSNormalization``: onnxruntime runs the opset-23 op itself, and
  its ``SimplifiedLayerNormalization`` is registered in the default domain, where ``onnx.checker``
  (opset 23) rejects it.

``SkipSimplifiedLayerNormalization`` computes ``s / sqrt(mean(s^2) + eps) * scale`` over the last
axis in float32, as ``RMSNormalization`` with ``stash_type=1`` does. Norms over other axes are left
alone.

It runs as :class:`RmsNormFusionPass` in the export's optimize stage (its rewrite slot, through
``ExportOptions.rewrite_passes``), after ``precision=`` and before the I/O names and the model's
validation, so the fused graph is the one checked and written.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir
from jax2onnx.rewrite import Rule, RuleFamily, miss, no_match, node_label, value_label

MS = "com.microsoft"
#: the op the fusion writes (a target that runs it gets the fusion)
NORM_OP = "SkipSimplifiedLayerNormalization"


class RmsNormFusionPass(RuleFamily):
    """The fusion as a rule family (``jax2onnx.rewrite``) for the optimize stage's rewrite slot: the
    rule ``skip_simplified_layer_norm`` records itself on the nodes it writes and explains a norm it
    leaves alone."""

    name = "llm_norms"
    # it reads the shapes the rewrite stage inferred; it runs in the optimize stage's rewrite slot,
    # where nothing declared is provided, and replaces what it fuses itself
    needs = frozenset()
    produces_dead_code = False
    scope = "main"

    def rules(self) -> Sequence[Rule]:
        return [Rule("skip_simplified_layer_norm", frozenset({"RMSNormalization"}), _match, _fuse)]

    def run(self, model: ir.Model, counts: dict[str, int]) -> bool:
        fused = super().run(model, counts)
        if fused:
            model.opset_imports.setdefault(MS, 1)
        return fused


def _match(graph: ir.Graph, node: ir.Node):
    """Pattern: RMSNormalization(Add(a, b), scale). Conditions: over the last axis of a
    (batch, sequence, hidden) sum of two values of its shape, the sum not a graph output."""
    if len(node.inputs) < 2:
        return no_match("an RMSNormalization without a scale")
    x = node.inputs[0]
    rank = len(x.shape) if x is not None and x.shape is not None else None
    axis = node.attributes.get_int("axis", -1)
    if rank is None or axis not in (-1, rank - 1) or rank not in (2, 3):
        return miss(f"the norm is not over the last axis of a rank-2 or rank-3 value {value_label(x)}")
    add = x.producer()
    if add is None or add.op_type != "Add" or add.domain not in ("", "ai.onnx") or len(add.inputs) != 2:
        return no_match("the normalised value is not a sum")
    if rank != 3 or not _same_shape(add.inputs[0], add.inputs[1], x):
        return miss(f"the Add {node_label(add)} does not sum two (batch, sequence, hidden) values of its shape")
    if x in graph.outputs:
        return miss(f"the sum {value_label(x)} is a graph output")
    return add


def _fuse(graph: ir.Graph, node: ir.Node, add: ir.Node) -> None:
    x, scale = node.inputs[0], node.inputs[1]
    epsilon = node.attributes.get_float("epsilon", 1e-5)
    fused = ir.Node(MS, NORM_OP, [add.inputs[0], add.inputs[1], scale],
                    attributes=[ir.AttrFloat32("epsilon", epsilon)], num_outputs=4,
                    name=f"{node.name}_skip_simplified")
    graph.insert_before(add, fused)
    out, summed = fused.outputs[0], fused.outputs[3]
    _take_over(node.outputs[0], out)
    summed.name, summed.type, summed.shape = f"{x.name}_sum", x.type, x.shape
    graph.remove(node, safe=False)
    _replace_uses(x, summed)
    graph.remove(add, safe=True)


def _same_shape(a: ir.Value, b: ir.Value, x: ir.Value) -> bool:
    shapes = [v.shape for v in (a, b, x)]
    if any(s is None or len(s) != 3 for s in shapes):
        return False
    return all(str(d1) == str(d2) for d1, d2 in zip(shapes[0], shapes[1])) and \
        all(str(d1) == str(d2) for d1, d2 in zip(shapes[0], shapes[2]))


def _take_over(old: ir.Value, new: ir.Value) -> None:
    """``new`` replaces ``old`` everywhere: name, type, shape, readers and graph-output slots."""
    name = old.name
    new.type, new.shape = old.type, old.shape
    _replace_uses(old, new)
    old.name = None
    new.name = name


def _replace_uses(old: ir.Value, new: ir.Value) -> None:
    # the graph-output slots first (onnx_ir's replace_graph_outputs=, which onnx-ir 0.1.10 lacks):
    # onnx_ir 1.x refuses to rewire the readers of a value that is still a graph output
    graph = old.graph
    if graph is not None:
        for i, out in enumerate(graph.outputs):
            if out is old:
                graph.outputs[i] = new
    ir.convenience.replace_all_uses_with(old, new)

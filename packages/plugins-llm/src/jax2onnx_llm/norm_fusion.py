"""``target="onnxruntime"``: RMS norms as onnxruntime's LLM norm ops (domain ``com.microsoft``).

The decoders' ``RMSNormalization`` nodes (opset 23; NNX ``RMSNorm`` lowers to one) become

- ``SkipSimplifiedLayerNormalization(a, b, scale)`` when the norm reads a residual sum ``a + b`` of
  two same-shaped ``(batch, sequence, hidden)`` values: the op adds and normalizes in one kernel
  and hands the sum on through its fourth output, which replaces the ``Add`` for its other readers
  (the residual stream of a pre-norm decoder); ``a + (b + bias)``, a projection's constant bias
  vector added first, gives the op its ``bias`` input too;
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
from jax2onnx.rewrite import (
    Op,
    Rule,
    RuleFamily,
    Var,
    constant_tensor,
    match,
    miss,
    no_match,
    node_label,
    only_reader,
    replace_value,
    value_label,
)

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


#: the residual sum a norm reads: ``a + c`` (either order), or ``a + (c + bias)`` with ``bias`` a
#: constant vector (a projection's bias, which the fused op adds too), either order at each Add
_SUM = Op("Add", Var("a"), Var("c"), name="add", why=no_match("the normalised value is not a sum"))
_BIASED = Op("Add", Var("a"), Op("Add", Var("c"), Var("bias", dims="h", test=lambda v, m: constant_tensor(v) is not None),
                                 name="bias_add", commutative=True), name="add", commutative=True)


def _match(graph: ir.Graph, node: ir.Node):
    """Pattern: RMSNormalization(a + c [+ bias], scale). Conditions: over the last axis of a
    (batch, sequence, hidden) sum of two values of its shape, the sum not a graph output; with a
    bias, the bias sum read by the sum alone and the bias as long as the hidden axis (else the
    bias sum is the skip input)."""
    if len(node.inputs) < 2:
        return no_match("an RMSNormalization without a scale")
    x = node.inputs[0]
    rank = len(x.shape) if x is not None and x.shape is not None else None
    axis = node.attributes.get_int("axis", -1)
    if rank is None or axis not in (-1, rank - 1) or rank not in (2, 3):
        return miss(f"the norm is not over the last axis of a rank-2 or rank-3 value {value_label(x)}")
    found = match(_BIASED, x)
    if not (found and _same_shape(found, x) and only_reader(found["bias_add"].outputs[0], found["add"], graph)):
        found = match(_SUM, x)
    if not found:
        return found
    if not _same_shape(found, x):
        return miss(f"the Add {node_label(found['add'])} does not sum two (batch, sequence, hidden) values of its shape")
    if x in graph.outputs:
        return miss(f"the sum {value_label(x)} is a graph output")
    return found


def _same_shape(found, x: ir.Value) -> bool:
    return all(found.fit(v, "b s h") for v in (x, found["a"], found["c"]))


def _fuse(graph: ir.Graph, node: ir.Node, found) -> None:
    x, scale, add = node.inputs[0], node.inputs[1], found["add"]
    epsilon = node.attributes.get_float("epsilon", 1e-5)
    bias = [found["bias"]] if "bias" in found else []
    fused = ir.Node(MS, NORM_OP, [found["a"], found["c"], scale, *bias],
                    attributes=[ir.AttrFloat32("epsilon", epsilon)], num_outputs=4,
                    name=f"{node.name}_skip_simplified")
    graph.insert_before(add, fused)
    y, out, summed = node.outputs[0], fused.outputs[0], fused.outputs[3]
    out.type, out.shape, summed.type, summed.shape = y.type, y.shape, x.type, x.shape
    name, y.name, summed.name = y.name, None, f"{x.name}_sum"
    replace_value(graph, y, out)  # the norm's readers and graph-output slot read the op's output
    out.name = name
    graph.remove(node, safe=False)
    replace_value(graph, x, summed)  # the sum's other readers (the residual stream) read the op's
    graph.remove(add, safe=True)
    if bias:
        graph.remove(found["bias_add"], safe=True)

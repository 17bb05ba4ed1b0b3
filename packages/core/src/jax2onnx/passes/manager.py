"""What the passes share: the graphs of a model, what a pass may declare it needs, the ops no pass
may merge or fold, the fixed-point loop of local rewrites, and the small node/value tests the matching rules use. Constants and ranks are read with :mod:`jax2onnx.ir.constants`.

The passes themselves are ``onnx_ir.passes`` passes (``InPlacePass`` subclasses) run by a
:class:`~.pipeline.PassPipeline`; see :func:`jax2onnx.passes.default_passes`.
"""

from __future__ import annotations

import onnx_ir as ir

from ..ir.constants import constant_tensor
from ..ir.graphs import all_graphs  # the passes' walk over every graph, kept here for pass authors

#: What a pass may declare it ``needs`` (:mod:`.pipeline` provides it before the pass runs): every
#: intermediate value typed and shaped, and no node that nothing reads.
SHAPES = "shapes"
NO_DEAD_CODE = "no_dead_code"

#: Ops whose outputs differ between two evaluations with the same inputs: never merged by common
#: subexpression elimination, never evaluated at export time by constant folding.
NONDETERMINISTIC_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"}
)


class RewriteToFixedPoint(ir.passes.InPlacePass):
    """A pass made of local rewrites: ``rewrite_once(graph)`` applies one and says whether it did;
    it runs until none applies, on every graph (function and control-flow bodies included)."""

    #: a rewrite reads the replaced node's inputs anew; the node is left to dead-code removal
    produces_dead_code = True

    def rewrite_once(self, graph: ir.Graph | ir.Function) -> bool:
        raise NotImplementedError

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for graph in list(all_graphs(model)):
            while self.rewrite_once(graph):
                modified = True
        return ir.passes.PassResult(model, modified)


def is_op(node: ir.Node | None, op_type: str) -> bool:
    """``node`` is the standard-domain op ``op_type``."""
    return node is not None and node.op_type == op_type and node.domain in ("", "ai.onnx")


def only_reader(v: ir.Value, node: ir.Node, graph: ir.Graph | ir.Function) -> bool:
    """``node`` is the one reader of ``v``, and ``v`` is not a graph output (a rule may fold it away)."""
    return v not in graph.outputs and all(user is node for user, _ in v.uses())


def const_vector(v: ir.Value | None, size: object) -> bool:
    """``v`` is a constant 1-D tensor of ``size`` entries (a static ``size``)."""
    t = constant_tensor(v)
    return t is not None and len(t.shape) == 1 and isinstance(size, int) and int(t.shape[0]) == size


def replace_value(graph: ir.Graph | ir.Function, old: ir.Value, new: ir.Value) -> None:
    """Every use of ``old`` reads ``new``; a graph output keeps its name (``new`` takes it)."""
    for i, v in enumerate(graph.outputs):
        if v is old:
            graph.outputs[i] = new
            name, old.name = old.name, None
            new.name = name
    ir.convenience.replace_all_uses_with(old, new)

"""What the passes share: the graphs of a model, the ops no pass may merge or fold, and the
fixed-point loop of local rewrites. Constants and ranks are read with :mod:`jax2onnx.ir.constants`.

The passes themselves are ``onnx_ir.passes`` passes (``InPlacePass`` subclasses) run by an
``onnx_ir.passes.PassManager``; see :func:`jax2onnx.passes.default_passes`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import onnx_ir as ir

from ..ir.graphs import all_graphs  # the passes' walk over every graph, kept here for pass authors


def rewrite_nodes(graphs: Iterable[ir.Graph | ir.Function], rule: Callable[[ir.Graph | ir.Function, ir.Node], bool],
                  counts: dict[str, int], key: str) -> bool:
    """``rule(graph, node)`` on every node of ``graphs`` that is still in its graph when reached (a
    rewrite removes nodes); each rewrite it reports is counted under ``key``. Whether any was made."""
    modified = False
    for graph in list(graphs):
        for node in list(graph):
            if node.graph is graph and rule(graph, node):
                counts[key] = counts.get(key, 0) + 1
                modified = True
    return modified


#: Ops whose outputs differ between two evaluations with the same inputs: never merged by common
#: subexpression elimination, never evaluated at export time by constant folding.
NONDETERMINISTIC_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"}
)


class RewriteToFixedPoint(ir.passes.InPlacePass):
    """A pass made of local rewrites: ``rewrite_once(graph)`` applies one and says whether it did;
    it runs until none applies, on every graph (function and control-flow bodies included)."""

    def rewrite_once(self, graph: ir.Graph | ir.Function) -> bool:
        raise NotImplementedError

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for graph in list(all_graphs(model)):
            while self.rewrite_once(graph):
                modified = True
        return ir.passes.PassResult(model, modified)

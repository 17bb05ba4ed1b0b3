"""Remove nodes whose outputs nothing reads, then initializers and functions nothing uses.

Rules:
- a node is dead when none of its outputs is a graph output or an input of any node (in any
  graph, subgraphs included, since a body may read outer values);
- an initializer no node reads and that is not a graph output is dropped;
- a function no node calls is dropped.
Nodes are visited in reverse order, so a chain of dead nodes goes in one pass.
"""

from __future__ import annotations

import onnx_ir as ir

from .manager import PassResult, all_graphs


class DeadCodeEliminationPass:
    def __call__(self, model: ir.Model) -> PassResult:
        modified = False
        changed = True
        while changed:
            changed = False
            for graph in list(all_graphs(model)):
                outputs = {id(v) for v in graph.outputs}
                for node in reversed(list(graph)):
                    if any(id(o) in outputs or o.uses() for o in node.outputs):
                        continue
                    graph.remove(node, safe=True)
                    changed = modified = True
        main = model.graph
        graph_outputs = {id(v) for v in main.outputs}
        for name, value in list(main.initializers.items()):
            if not value.uses() and id(value) not in graph_outputs:
                del main.initializers[name]
                modified = True
        called = {(n.domain, n.op_type, n.overload) for g in all_graphs(model) for n in g}
        for key in list(model.functions):
            if key not in called:
                del model.functions[key]
                modified = True
        return PassResult(model, modified)

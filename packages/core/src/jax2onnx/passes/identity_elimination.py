"""Remove ``Identity`` nodes that only rename a value.

Rules:
- an Identity whose output is not an output of its graph is removed and its readers read the
  input directly (in any graph, function bodies and control-flow bodies included);
- an Identity that produces a graph output stays: the output keeps its name, and ONNX bodies may
  not return their own inputs or outer values directly.
"""

from __future__ import annotations

import onnx_ir as ir

from .manager import all_graphs


class IdentityEliminationPass(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for graph in list(all_graphs(model)):
            outputs = {id(v) for v in graph.outputs}
            for node in list(graph):
                if node.op_type != "Identity" or node.domain not in ("", "ai.onnx") or len(node.inputs) != 1:
                    continue
                out = node.outputs[0]
                src = node.inputs[0]
                if id(out) in outputs or src is None:
                    continue
                ir.convenience.replace_all_uses_with(out, src)
                graph.remove(node, safe=True)
                modified = True
        return ir.passes.PassResult(model, modified)

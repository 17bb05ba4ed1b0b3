"""Remove ``Identity`` nodes that only rename a value.

Rules:
- an Identity whose output is not an output of its graph is removed and its readers read the
  input directly (in any graph, function bodies and control-flow bodies included);
- an Identity that produces a graph output stays: the output keeps its name, and ONNX bodies may
  not return their own inputs or outer values directly.

Why ours and not ``onnx_ir.passes.common.IdentityEliminationPass`` (onnx_ir 1.1.0): onnx_ir's
also removes an Identity that produces a graph output by renaming its input to the output's name,
and a function returning one array twice (``return y, y``, which the lowering writes as ``y`` and
``Identity(y)``) then exports two outputs both named ``output_1``: ``output_0`` is gone, the
outputs' names are what users feed and fetch by. Ours keeps every output's own node and name.
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

"""Merge nodes that compute the same thing: same op, same inputs, same attributes.

Rules:
- two nodes with equal (domain, op_type, inputs by identity, attributes) are merged: readers of
  the later node read the earlier one's outputs; shape computations for symbolic dims and
  repeated casts are the usual beneficiaries;
- nodes with subgraph attributes, nondeterministic ops, and nodes whose outputs are graph outputs
  are never merged away;
- each graph (function bodies and control-flow bodies included) is handled on its own.

Why ours and not ``onnx_ir.passes.common.CommonSubexpressionEliminationPass`` (measured with
``bench/node_counts.py`` on every third testcase of every pack, 544, onnx_ir 1.1.0): onnx_ir's
merges in the main graph only, never in Loop/Scan/If bodies or function bodies, so 22 testcases
got more nodes and none fewer (lax.linalg.schur batched: 1314 -> 2009, eig: +420 each,
fori_loop_vector: 21 -> 28, onnx_function bodies: +1 to +2). Revisit when it walks subgraphs.
"""

from __future__ import annotations

import onnx_ir as ir

from ..ir.graphs import attribute_items
from .manager import NONDETERMINISTIC_OPS, all_graphs


def _attr_key(attr: ir.Attr) -> object:
    if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
        return None
    if attr.type == ir.AttributeType.TENSOR:
        arr = attr.value.numpy()
        return ("T", arr.dtype.str, arr.shape, arr.tobytes())
    value = attr.value
    return tuple(value) if isinstance(value, list) else value


class CommonSubexpressionEliminationPass(ir.passes.InPlacePass):
    produces_dead_code = True  # a merged duplicate's producer is left to dead-code removal

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for graph in list(all_graphs(model)):
            outputs = {id(v) for v in graph.outputs}
            seen: dict[tuple, ir.Node] = {}
            for node in list(graph):
                if node.op_type in NONDETERMINISTIC_OPS:
                    continue
                attrs = []
                mergeable = True
                for name, attr in sorted(attribute_items(node)):
                    k = _attr_key(attr)
                    if k is None:
                        mergeable = False
                        break
                    attrs.append((name, k))
                if not mergeable:
                    continue
                key = (node.domain, node.op_type, node.overload, tuple(id(x) if x is not None else None for x in node.inputs), tuple(attrs), len(node.outputs))
                first = seen.get(key)
                if first is None:
                    seen[key] = node
                    continue
                if any(id(o) in outputs for o in node.outputs):
                    continue
                for old, new in zip(node.outputs, first.outputs):
                    ir.convenience.replace_all_uses_with(old, new)
                graph.remove(node, safe=True)
                modified = True
        return ir.passes.PassResult(model, modified)

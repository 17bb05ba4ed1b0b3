"""Node counts of an ONNX model, as the bench reports compare them (ours and the published jax2onnx
alike): pure ``onnx``, so it imports in either side's venv."""

from __future__ import annotations

from typing import Any


def count_nodes(model: Any) -> dict:
    """Nodes of the main graph, and in total with local functions and control-flow bodies expanded."""
    import onnx

    functions = {(f.domain, f.name, getattr(f, "overload", "")): f for f in model.functions}
    ops: dict[str, int] = {}

    def expand(nodes: Any, depth: int = 0) -> int:
        total = 0
        for node in nodes:
            body = functions.get((node.domain, node.op_type, getattr(node, "overload", "")))
            if body is not None and depth < 50:
                total += expand(body.node, depth + 1)
            else:
                total += 1
                ops[node.op_type] = ops.get(node.op_type, 0) + 1
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    total += expand(attr.g.node, depth + 1)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    total += sum(expand(g.node, depth + 1) for g in attr.graphs)
        return total

    total = expand(model.graph.node)
    return {
        "main": len(model.graph.node),
        "total": total,
        "functions": len(model.functions),
        "initializers": len(model.graph.initializer),
        "ops": dict(sorted(ops.items(), key=lambda kv: -kv[1])),
    }

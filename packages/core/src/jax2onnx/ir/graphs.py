"""Walking an ``onnx_ir`` model's graphs: the passes, the opset check and validation share it."""

from __future__ import annotations

from collections.abc import Iterator

import onnx_ir as ir


def all_graphs(model: ir.Model) -> Iterator[ir.Graph | ir.Function]:
    """The main graph, every subgraph (If/Loop/Scan bodies) and every function body."""
    stack: list[ir.Graph | ir.Function] = [model.graph, *model.functions.values()]
    while stack:
        g = stack.pop()
        yield g
        for node in g:
            for attr in node.attributes.values():
                if attr.type == ir.AttributeType.GRAPH:
                    stack.append(attr.value)
                elif attr.type == ir.AttributeType.GRAPHS:
                    stack.extend(attr.value)

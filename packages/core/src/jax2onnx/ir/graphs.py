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


class FreshNames:
    """Fresh value names, unique across the whole model: graph inputs, initializers and node outputs
    of the main graph, every subgraph and every function body. Calling it with a base name returns
    the base, or ``base_2``, ``base_3``, ... when taken, and reserves what it returns."""

    def __init__(self, model: ir.Model):
        self.taken = set(model.graph.initializers) | {v.name for v in model.graph.inputs}
        for g in all_graphs(model):
            for node in g:
                self.taken.update(o.name for o in node.outputs if o.name)
            if isinstance(g, ir.Graph):
                self.taken.update(g.initializers)
                self.taken.update(v.name for v in g.inputs)

    def __call__(self, base: str) -> str:
        name, k = base, 1
        while name in self.taken:
            k += 1
            name = f"{base}_{k}"
        self.taken.add(name)
        return name

"""Walking an ``onnx_ir`` model's graphs: the passes, the opset check and validation share it."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import onnx_ir as ir

_GRAPH = ir.AttributeType.GRAPH
_GRAPHS = ir.AttributeType.GRAPHS


def attribute_values(node: ir.Node) -> Iterable[ir.Attr]:
    """``node.attributes.values()`` without the generic mapping protocol: onnx_ir's ``Attributes``
    is a ``UserDict``, whose ``values()`` walks a view over ``__iter__`` and ``__getitem__`` per
    attribute; its ``data`` dict iterates natively (older onnx_ir held a plain dict, used as is).
    The passes walk every node's attributes for subgraphs many times per export."""
    attrs = node.attributes
    return getattr(attrs, "data", attrs).values()


def attribute_items(node: ir.Node) -> Iterable[tuple[str, ir.Attr]]:
    """``node.attributes.items()``, as :func:`attribute_values`."""
    attrs = node.attributes
    return getattr(attrs, "data", attrs).items()


def all_graphs(model: ir.Model) -> Iterator[ir.Graph | ir.Function]:
    """The main graph, every subgraph (If/Loop/Scan bodies) and every function body.

    A graph's subgraphs are looked up after the caller has handled the graph (a pass that rewrote
    it is walked into as it now is)."""
    stack: list[ir.Graph | ir.Function] = [model.graph, *model.functions.values()]
    while stack:
        g = stack.pop()
        yield g
        for node in g:
            # attribute_values inlined, and attribute-less nodes (most) skipped: the passes walk
            # every graph of the model some thirty times per export
            attrs = node.attributes
            attrs = getattr(attrs, "data", attrs)
            if not attrs:
                continue
            for attr in attrs.values():
                kind = attr.type
                if kind == _GRAPH:
                    stack.append(attr.value)
                elif kind == _GRAPHS:
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

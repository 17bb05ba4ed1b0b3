"""A pass returns :class:`PassResult`; :class:`PassManager` runs a list of passes in order."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Protocol

import onnx_ir as ir


@dataclasses.dataclass(frozen=True)
class PassResult:
    model: ir.Model
    modified: bool


class GraphPass(Protocol):
    def __call__(self, model: ir.Model) -> PassResult: ...


class PassManager:
    def __init__(self, passes: Sequence[GraphPass]):
        self.passes = list(passes)

    def __call__(self, model: ir.Model) -> PassResult:
        modified = False
        for p in self.passes:
            modified |= p(model).modified
        return PassResult(model, modified)


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

"""Walks over an ``onnx.ModelProto``: every graph (the main graph and the bodies of If/Loop/Scan,
nested) and every node (those graphs' and the model's functions'). The export report,
the opset legalization's bookkeeping and the testcase checks need the same walk. (saving.py keeps its
own: it is loaded standalone by its crash test.)"""

from __future__ import annotations

from collections.abc import Iterator

import onnx


def graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every graph nested in its nodes' attributes, depth first."""
    yield graph
    for node in graph.node:
        yield from _subgraphs(node)


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield from graphs(attr.g)
        elif attr.type == onnx.AttributeProto.GRAPHS:
            for sub in attr.graphs:
                yield from graphs(sub)


def nodes(model: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    """Every node of ``model``: its graphs' (nested bodies included) and its functions' (and their bodies')."""
    for g in graphs(model.graph):
        yield from g.node
    for fn in model.functions:
        for node in fn.node:
            yield node
            for g in _subgraphs(node):
                yield from g.node

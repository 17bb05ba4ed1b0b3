"""Building replacement nodes on an ``onnx_ir`` graph: ``m.op.<Op>(*inputs, **attrs)`` and
``m.k(value)``, the interface the lax pack's ``Math`` offers its lowerings, so one form
(:mod:`jax2onnx.forms`) serves both. Nodes are collected, then inserted where the caller says."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from ..manager import replace_value

#: Ops whose output is boolean whatever the inputs.
_BOOL_OUT = frozenset({"Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Equal", "Not", "And", "Or", "IsNaN",
                       "IsInf"})


def taken_names(graph: ir.Graph | ir.Function) -> set[str]:
    names = {v.name for v in graph.inputs if v.name}
    if isinstance(graph, ir.Graph):
        names |= set(graph.initializers)
    for node in graph:
        names |= {v.name for v in node.outputs if v.name}
        if node.name:
            names.add(node.name)
    return names


def add_initializer(graph: ir.Graph, name: str, array: np.ndarray) -> ir.Value:
    """A new initializer of ``graph`` holding ``array`` (its tensor named like the value, as the
    file's initializer will be): the constants a rewrite adds beside the nodes it writes."""
    value = ir.Value(name=name, const_value=ir.tensor(array, name=name))
    graph.register_initializer(value)
    return value


def substitute(graph: ir.Graph, out: ir.Value, node: ir.Node, name: str) -> None:
    """Put ``node`` (one op computing what ``out`` holds, e.g. a LayerNormalization for a hand-written
    norm) in ``out``'s place: its output takes ``out``'s type, shape (else its first input's) and
    ``name``, it goes in before ``out``'s producer, and every reader of ``out`` reads it instead."""
    new = node.outputs[0]
    new.type, new.shape = out.type, out.shape if out.shape is not None else node.inputs[0].shape
    new.name = name
    graph.insert_before(out.producer(), node)
    replace_value(graph, out, new)


class Emitter:
    """Nodes computing an elementwise function of ``like`` (a value whose type and shape every
    float result shares). Constants are initializers of a graph and ``Constant`` nodes in a
    function body (ONNX functions hold no initializers)."""

    def __init__(self, graph: ir.Graph | ir.Function, like: ir.Value, prefix: str, taken: set[str]) -> None:
        self.graph, self.like, self.prefix, self.taken = graph, like, prefix, taken
        self.nodes: list[ir.Node] = []
        self.initializers: list[ir.Value] = []
        self.op = _Ops(self)
        self._dtype = like.dtype.numpy() if like.dtype is not None else np.dtype(np.float32)

    def fresh(self, stem: str) -> str:
        n = 0
        while f"{self.prefix}_{stem}{n}" in self.taken:
            n += 1
        name = f"{self.prefix}_{stem}{n}"
        self.taken.add(name)
        return name

    def k(self, value: float) -> ir.Value:
        tensor = ir.tensor(np.asarray(value, dtype=self._dtype), name=self.fresh("k"))
        if isinstance(self.graph, ir.Graph):
            v = ir.Value(name=tensor.name, type=ir.TensorType(tensor.dtype), shape=ir.Shape([]), const_value=tensor)
            self.initializers.append(v)
            return v
        node = ir.Node("", "Constant", [], [ir.AttrTensor("value", tensor)], name=self.fresh("const"))
        out = node.outputs[0]
        out.name, out.type, out.shape = tensor.name, ir.TensorType(tensor.dtype), ir.Shape([])
        self.nodes.append(node)
        return out

    def emit(self, op_type: str, inputs: list[Any], attrs: dict[str, Any], domain: str = "") -> ir.Value:
        node = ir.Node(domain, op_type, inputs, ir.convenience.convert_attributes(attrs), name=self.fresh(op_type))
        out = node.outputs[0]
        out.name = self.fresh("v")
        out.type = ir.TensorType(ir.DataType.BOOL) if op_type in _BOOL_OUT else self.like.type
        out.shape = self.like.shape
        self.nodes.append(node)
        return out

    def insert_after(self, anchor: ir.Node | None) -> None:
        """Put the collected nodes after ``anchor`` (first in the graph when None: the function
        reads a graph input) and register the constants."""
        for v in self.initializers:
            self.graph.register_initializer(v)
        if not self.nodes:
            return
        if anchor is None:
            first = next(iter(self.graph), None)
            if first is None:
                self.graph.extend(self.nodes)
            else:
                self.graph.insert_before(first, self.nodes)
        else:
            self.graph.insert_after(anchor, self.nodes)


class _Ops:
    def __init__(self, emitter: Emitter) -> None:
        self._e = emitter

    def __getattr__(self, op_type: str):
        def make(*inputs: Any, _domain: str = "", **attrs: Any) -> ir.Value:
            return self._e.emit(op_type, list(inputs), attrs, _domain)

        return make

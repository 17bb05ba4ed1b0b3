"""What the passes share: the graphs of a model, the ops no pass may merge or fold, reading
constants and ranks, and the fixed-point loop of local rewrites.

The passes themselves are ``onnx_ir.passes`` passes (``InPlacePass`` subclasses) run by an
``onnx_ir.passes.PassManager``; see :func:`jax2onnx.passes.default_passes`.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import onnx_ir as ir

#: Ops whose outputs differ between two evaluations with the same inputs: never merged by common
#: subexpression elimination, never evaluated at export time by constant folding.
NONDETERMINISTIC_OPS = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial", "Bernoulli", "Dropout"}
)


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


class RewriteToFixedPoint(ir.passes.InPlacePass):
    """A pass made of local rewrites: ``rewrite_once(graph)`` applies one and says whether it did;
    it runs until none applies, on every graph (function and control-flow bodies included)."""

    def rewrite_once(self, graph: ir.Graph | ir.Function) -> bool:
        raise NotImplementedError

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        for graph in list(all_graphs(model)):
            while self.rewrite_once(graph):
                modified = True
        return ir.passes.PassResult(model, modified)


def constant_tensor(v: ir.Value | None) -> ir.TensorProtocol | None:
    """``v``'s value when it is a constant: an initializer's (or folded value's) tensor, or a
    ``Constant`` node's ``value`` (function bodies hold their constants as nodes); else None."""
    if v is None:
        return None
    if v.const_value is not None:
        return v.const_value
    node = v.producer()
    if node is None or node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or "value" not in node.attributes:
        return None
    return node.attributes["value"].value


def constant_ints(v: ir.Value | None) -> list[int] | None:
    """A constant ``v``'s elements as Python ints (axes, starts, shapes), flattened; else None."""
    tensor = constant_tensor(v)
    return None if tensor is None else [int(a) for a in np.asarray(tensor.numpy()).reshape(-1)]


def is_size_one_constant(v: ir.Value) -> bool:
    """A constant of one element, which broadcasts the same against any layout of the other operand."""
    tensor = constant_tensor(v)
    return tensor is not None and int(np.prod([int(d) for d in tensor.shape])) == 1


def rank(v: ir.Value | None) -> int | None:
    return None if v is None or v.shape is None else len(v.shape)

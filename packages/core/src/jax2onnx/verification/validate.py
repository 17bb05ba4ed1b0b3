"""The last stage of every export: the finished model must be a valid ONNX model.

``to_onnx`` runs it as the last pass of its ``optimize`` stage (:class:`ValidationPass`, in the
validation slot of ``export/optimize.py``), after the passes and before anything is written or
returned. It runs

- ``onnx.checker.check_model(full_check=True)``: the structural checks (node arity, attributes,
  topological order, SSA, opset imports, model-local functions) and onnx's shape inference in
  strict mode with type checking, so an op given operand types or ranks its schema rejects fails
  here rather than when onnxruntime loads the file;
- a check that every initializer of every graph is read by some node or is a graph output
  (onnxruntime drops unused ones with a warning at load; we never write them).

A failure is a bug in jax2onnx, not in the user's function, so it raises :class:`InvalidModelError`
naming the offending node and the lowering that emitted it (the primitive, its pack and the user's
``file:line``, recorded on each node while lowering in ``node.meta`` by ``lower/origin.py``, which is
never serialized).

Cost: the checker and onnx's inference are C++ on a serialized copy of the model without its
weights (:func:`jax2onnx.ir.shapes.weightless_proto`), so a model's weights are never copied nor read.
Measured (``bench/validate_cost.py``): 15 ms of a 2.3 s export for 1058 nodes and 192 MiB of
weights; 0.17 s of 3.9 s for 8802 nodes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import onnx
import onnx_ir as ir

from ..errors import InvalidModelError
from ..ir.shapes import weightless_proto
from ..lower.origin import ORIGIN, Origin
from ..passes.dead_code import read_values
from ..passes.manager import all_graphs

# How the checker and shape inference name a node in their messages.
_NODE_NAME = [
    re.compile(r"node name: ([^)\s]+)\)"),  # shape inference: "(op_type:Loop, node name: node_Loop_3)"
    re.compile(r"Node ?\(([^)]+)\)"),  # checker: "Node(node_Loop_3) with schema(::Loop:23) has input size 1 ..."
    re.compile(r"Name: (\S+) OpType"),  # checker context: "Bad node spec for node. Name: node_Loop OpType: Loop"
    re.compile(r"Nodes in a graph must be topologically sorted, however input .* of node: name: ([^\s]+)"),
]


def validate_model(model: ir.Model, proto: onnx.ModelProto | None = None) -> None:
    """Raise :class:`InvalidModelError` unless ``model`` passes the checker (full check), strict
    shape inference and has no unused initializers. The model is left unchanged. ``proto``: the
    model's weightless proto (:func:`~jax2onnx.ir.shapes.weightless_proto`) when the caller has
    it already (the export's last shape inference made one); else it is serialized here."""
    unused = list(_unused_initializers(model))
    if unused:
        names = ", ".join(repr(v.name) for v in unused[:5]) + (f" and {len(unused) - 5} more" if len(unused) > 5 else "")
        raise InvalidModelError(
            f"internal error: the exported model holds initializers no node reads ({names}). "
            "A lowering or pass left a constant behind; please report this with the function exported."
        )

    try:
        onnx.checker.check_model(weightless_proto(model) if proto is None else proto, full_check=True)
    except Exception as exc:  # onnx raises ValidationError, InferenceError or C++ errors (length_error ...)
        raise InvalidModelError(_explain(model, exc)) from exc


class ValidationPass(ir.passes.InPlacePass):
    """:func:`validate_model` as the export's last pass (it changes nothing). ``proto_of``: gives
    the model's weightless proto where an earlier pass of the same run made one (else None)."""

    def __init__(self, proto_of: Callable[[ir.Model], onnx.ModelProto | None] | None = None) -> None:
        super().__init__()
        self.proto_of = proto_of

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        validate_model(model, self.proto_of(model) if self.proto_of is not None else None)
        return ir.passes.PassResult(model, False)


def origin_of(node: ir.Node, owners: dict[int, ir.Node] | None = None) -> Origin | None:
    """Which lowering emitted ``node``: its own record, else that of the If/Loop/Scan node whose
    body holds it (``owners``: id of a body graph -> its node, from :func:`_body_owners`)."""
    n: ir.Node | None = node
    while n is not None:
        origin = n.meta.get(ORIGIN)
        if origin is not None:
            return origin
        n = (owners or {}).get(id(n.graph))
    return None


def _body_owners(model: ir.Model) -> dict[int, ir.Node]:
    owners: dict[int, ir.Node] = {}
    for graph in all_graphs(model):
        for node in graph:
            for attr in node.attributes.values():
                if attr.type == ir.AttributeType.GRAPH:
                    owners[id(attr.value)] = node
                elif attr.type == ir.AttributeType.GRAPHS:
                    owners.update((id(g), node) for g in attr.value)
    return owners


def _unused_initializers(model: ir.Model) -> Iterator[ir.Value]:
    """Initializers no node of the model reads and no graph outputs. Counted from the nodes the
    model holds, not from ``Value.uses()``: a node removed with its If/Loop still lists its body's
    nodes among the uses of the outer values they read, which is how an unused initializer once
    got past onnx_ir's dead-code pass (and onnxruntime warned "Removing initializer 'mul'")."""
    read = read_values(model)
    for graph in all_graphs(model):
        for value in getattr(graph, "initializers", {}).values():  # a Function has none
            if id(value) not in read:
                yield value


def _explain(model: ir.Model, exc: Exception) -> str:
    text = str(exc).strip()
    node = _find_node(model, text)
    if node is None:
        where = "the graph"
    else:
        origin = origin_of(node, _body_owners(model))
        made_by = f"made by {origin}" if origin else "made by a graph pass (no lowering recorded)"
        where = f"node {node.name!r} ({node.op_type}), {made_by}"
    return (
        f"internal error: jax2onnx built an invalid ONNX model ({where}); nothing was written. "
        f"onnx says: {type(exc).__name__}: {text}\nThis is a bug in that lowering or pass; please report "
        "it with the function exported (to_onnx(..., optimize=False) shows whether a pass is involved)."
    )


def _find_node(model: ir.Model, text: str) -> ir.Node | None:
    names = [m.group(1) for pattern in _NODE_NAME for m in pattern.finditer(text)]
    if not names:
        return None
    for graph in all_graphs(model):
        for node in graph:
            if node.name in names:
                return node
    return None


__all__ = ["InvalidModelError", "origin_of", "validate_model"]

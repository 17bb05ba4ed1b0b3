"""Dead code: onnx_ir's reachability-based removal of unused nodes, functions and opsets.

Rules (as onnx_ir implements them):
- a node is dead when none of its outputs is an output of its graph or read by any node, in any
  graph (a control-flow body reading an outer value counts as a reader); each graph is walked from
  its end, so a chain of dead nodes goes in one sweep;
- an initializer nothing reads and that is not a graph input or output is dropped;
- a function no node calls is dropped, and so is an opset import no node uses.

onnx_ir also trims every node's trailing omitted ("") inputs, even below the count its schema
requires: ``Loop(M, "")`` with no loop-carried values (a ``lax.scan`` whose only carry passes
through unchanged, which JAX turns into a constant) became a one-input Loop that the checker
rejects and onnx's shape inference crashes on. :class:`RestoreRequiredInputs` runs after it and
puts those slots back.

onnx_ir decides that an initializer is unused from ``Value.uses()``, which still lists the nodes of
the bodies of an If/Loop removed as dead (their nodes keep reading the outer value), so such an
initializer stayed and onnxruntime dropped it with a warning ("Removing initializer 'mul'", from
diffrax's output-less conds). :class:`RemoveUnreadInitializers` counts the readers from the nodes
the model holds.
"""

from __future__ import annotations

import functools

import onnx
import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedFunctionsPass, RemoveUnusedNodesPass, RemoveUnusedOpsetsPass

from .manager import all_graphs


@functools.cache
def _min_inputs(op_type: str, opset: int) -> int | None:
    """The schema's minimum input count (None: no such op), cached: the pass runs after every
    dead-code removal over every node, and looking a schema up in onnx is a C++ call that builds
    a new schema object each time."""
    try:
        return onnx.defs.get_schema(op_type, opset, "").min_input
    except onnx.defs.SchemaError:
        return None


class RestoreRequiredInputs(ir.passes.InPlacePass):
    """Give every default-domain node at least its schema's minimum number of inputs (omitted
    ones as ""), undoing onnx_ir's trimming of required optional slots such as Loop's ``cond``."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        opset = model.opset_imports.get("")
        changed = False
        if opset is None:
            return ir.passes.PassResult(model, False)
        for graph in all_graphs(model):
            for node in graph:
                if node.domain not in ("", "ai.onnx"):
                    continue
                need = _min_inputs(node.op_type, opset)
                if need is not None and len(node.inputs) < need:
                    node.resize_inputs(need)
                    changed = True
        return ir.passes.PassResult(model, changed)


def read_values(model: ir.Model) -> set[int]:
    """Ids of every value some node of the model reads or some graph of it outputs."""
    read: set[int] = set()
    for graph in all_graphs(model):
        read.update(id(v) for v in graph.outputs)
        for node in graph:
            read.update(id(v) for v in node.inputs if v is not None)
    return read


class RemoveUnreadInitializers(ir.passes.InPlacePass):
    """Drop initializers (not graph inputs) that no node of the model reads and no graph outputs."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        read = read_values(model)
        changed = False
        for graph in model.graphs():
            inputs = {id(v) for v in graph.inputs}
            for name, value in list(graph.initializers.items()):
                if id(value) not in read and id(value) not in inputs:
                    graph.initializers.pop(name)
                    changed = True
        return ir.passes.PassResult(model, changed)


class DeadCodeEliminationPass(ir.passes.Sequential):
    def __init__(self) -> None:
        super().__init__(RemoveUnusedNodesPass(), RestoreRequiredInputs(), RemoveUnreadInitializers(),
                         RemoveUnusedFunctionsPass(), RemoveUnusedOpsetsPass())

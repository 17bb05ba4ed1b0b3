"""Evaluate nodes whose inputs are all constants and replace them by initializers.

Rules:
- a node folds when every input is an initializer or the output of a ``Constant`` node, it has no
  subgraph, and it is deterministic (``RandomNormal`` and the like never fold);
- ``Shape``/``Size`` of a value whose shape is fully static folds even though the value is not;
- results larger than ``max_elements`` stay unfolded unless the node only moves data around
  (``Transpose``/``Reshape``/``Cast`` of a weight), which folds at any size: one weight in the
  right layout beats a weight plus a runtime op;
- but a fold whose large constant input (over ``shared_max_elements``) is also used elsewhere (a
  tied weight: embedding lookup and output projection) is skipped once the result exceeds
  ``shared_max_elements``: the original stays, so folding would store the weight twice. Small
  shared inputs (a pooled shape constant read by every Reshape of a weight) do not count: keeping
  them costs nothing;
- folding runs on the main graph (function bodies cannot hold initializers).
The folded value keeps the node output's name, so graph outputs and value names stay stable.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from ..ir.constants import constant_array
from ..ir.graphs import attribute_values
from .manager import NO_DEAD_CODE, NONDETERMINISTIC_OPS

_LAYOUT_OPS = {"Transpose", "Reshape", "Cast", "Squeeze", "Unsqueeze", "Identity", "Flatten", "Neg"}


def _has_shared_input(node: ir.Node, arrays: list[np.ndarray | None], min_elements: int) -> bool:
    """Some input of more than ``min_elements`` is also read by another node or is a graph output
    (it stays after folding)."""
    for v, a in zip(node.inputs, arrays):
        if v is None or a is None or a.size <= min_elements:
            continue
        if any(user is not node for user, _ in v.uses()) or v.is_graph_output():
            return True
    return False


def _static_shape(v: ir.Value) -> list[int] | None:
    if v.shape is None:
        return None
    dims = []
    for d in v.shape:
        if not isinstance(d, int):
            return None
        dims.append(d)
    return dims


def _constant_inputs(node: ir.Node) -> list[np.ndarray | None] | None:
    """Every input's value (None for an omitted one) when all given inputs are constants, else None;
    stops at the first input that is not: most nodes of a graph have one, and reading the
    others' tensors first was most of this pass's time. A lazy weight is not loaded to fold it."""
    if not node.inputs:
        return None
    arrays = []
    for v in node.inputs:
        arr = constant_array(v, lazy=False)
        if arr is None and v is not None:
            return None
        arrays.append(arr)
    return arrays


class ConstantFoldingPass(ir.passes.InPlacePass):
    needs = frozenset({NO_DEAD_CODE})  # less to fold
    produces_dead_code = True  # a folded node's inputs' producers are left to dead-code removal

    def __init__(self, max_elements: int = 1 << 20, shared_max_elements: int = 1024):
        super().__init__()
        self.max_elements = max_elements
        self.shared_max_elements = shared_max_elements

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        modified = False
        opset = graph.opset_imports.get("", 23)
        for node in list(graph):
            if node.domain not in ("", "ai.onnx") or node.op_type in NONDETERMINISTIC_OPS or node.op_type == "Constant":
                continue
            if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in attribute_values(node)):
                continue
            results = self._fold_shape(node) if node.op_type in ("Shape", "Size") else None
            if results is None:
                arrays = _constant_inputs(node)
                if arrays is None:
                    continue
                results = _evaluate(node, arrays, opset)
                if results is None or not _types_match(node, results):
                    continue
                if node.op_type not in _LAYOUT_OPS and any(r.size > self.max_elements for r in results):
                    continue
                if _has_shared_input(node, arrays, self.shared_max_elements) and any(r.size > self.shared_max_elements for r in results):
                    continue
            for out, arr in zip(node.outputs, results):
                self._replace(graph, out, np.asarray(arr))
            # safe: also detach the node from its inputs, or a folded-away weight still counts a
            # reader and dead-code elimination keeps it (float64 exports carried both copies).
            graph.remove(node, safe=True)
            modified = True
        return ir.passes.PassResult(model, modified)

    @staticmethod
    def _fold_shape(node: ir.Node) -> list[np.ndarray] | None:
        shape = _static_shape(node.inputs[0])
        if shape is None:
            return None
        if node.op_type == "Size":
            return [np.array(int(np.prod(shape)), dtype=np.int64)]
        start = node.attributes["start"].value if "start" in node.attributes else 0
        end = node.attributes["end"].value if "end" in node.attributes else len(shape)
        return [np.array(shape[start:end] if end is not None else shape[start:], dtype=np.int64)]

    @staticmethod
    def _replace(graph: ir.Graph, out: ir.Value, arr: np.ndarray) -> None:
        name = out.name
        is_output = any(o is out for o in graph.outputs)
        new = ir.Value(name=None, type=ir.TensorType(ir.DataType.from_numpy(arr.dtype)), shape=ir.Shape(list(arr.shape)),
                       const_value=ir.Tensor(arr))
        if is_output:
            graph.outputs[:] = [new if o is out else o for o in graph.outputs]
        ir.convenience.replace_all_uses_with(out, new)
        out.name = None
        new.name = name
        new.const_value.name = name
        graph.register_initializer(new)


def _evaluate(node: ir.Node, arrays: list[np.ndarray | None], opset: int) -> list[np.ndarray] | None:
    """Run one node with onnx's reference evaluator (exact ONNX semantics, no hand-written copies)."""
    in_names = [f"i{k}" if a is not None else "" for k, a in enumerate(arrays)]
    feeds = {n: a for n, a in zip(in_names, arrays) if a is not None}
    try:
        inputs = tuple((n, onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in feeds.items())
        attrs = tuple(ir.serde.serialize_attribute(a).SerializeToString() for a in node.attributes.values())
        evaluator = _evaluator(node.op_type, node.domain, attrs, tuple(in_names), inputs, len(node.outputs), opset)
        results = evaluator.run(None, feeds)
    except Exception:  # noqa: BLE001 - anything the reference cannot do simply stays in the graph
        return None
    return [np.asarray(r) for r in results]


@functools.lru_cache(maxsize=512)
def _evaluator(op_type: str, domain: str, attrs: tuple[bytes, ...], in_names: tuple[str, ...],
               inputs: tuple[tuple[str, int, tuple[int, ...]], ...], n_outputs: int, opset: int) -> Any:
    """The reference evaluator of a one-node model, by everything the model is made of: building
    one was most of a fold's time (a node run is a tenth of it), and a graph folds many nodes alike
    (a Reshape per weight). Stateless between runs for the deterministic ops that fold."""
    from onnx.reference import ReferenceEvaluator

    out_names = [f"o{k}" for k in range(n_outputs)]
    proto_node = onnx.helper.make_node(op_type, list(in_names), out_names, domain=domain)
    proto_node.attribute.extend(onnx.AttributeProto.FromString(a) for a in attrs)
    graph = onnx.helper.make_graph(
        [proto_node], "fold",
        [onnx.helper.make_tensor_value_info(n, dtype, shape) for n, dtype, shape in inputs],
        [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None) for n in out_names],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    return ReferenceEvaluator(model)


def _types_match(node: ir.Node, results: list[np.ndarray]) -> bool:
    """The reference evaluator must give back the dtype the graph declared, or we keep the node."""
    for out, arr in zip(node.outputs, results):
        if out.type is not None and out.type.dtype != ir.DataType.from_numpy(np.asarray(arr).dtype):
            return False
    return len(results) == len(node.outputs)

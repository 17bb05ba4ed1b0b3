"""onnx's shape inference on an ``onnx_ir`` model, and the weightless copy the C++ checks read.

Both run on a serialized copy of the model (onnx's inference and checker are C++ on a proto). The
copy leaves out the bytes of every initializer over 1 KB and of every lazy (``Weights``) or external
one: those are typed graph inputs in the copy, so a model's weights are never copied nor read.

:func:`infer_intermediate_shapes` writes what inference found back onto the model's values by
walking the inferred proto beside the model, node by node: the copy was serialized from the model,
so the i-th node of a graph is the i-th node of its copy and a subgraph is its node's attribute of
the same name. onnx_ir's ``ShapeInferencePass`` deserializes the whole inferred model into a second
IR model to compare names; that copy was half of the passes' time on a small export (a testcase at
three opsets ran it six times).
"""

from __future__ import annotations

from typing import Any

import onnx
import onnx_ir as ir

from .graphs import attribute_values

#: Initializers up to this size keep their values in the weightless copy (shape inference reads small
#: shape/axes constants); larger ones, lazy ones (``Weights``) and external ones become typed inputs.
SMALL_INITIALIZER_BYTES = 1024


def weightless_proto(model: ir.Model) -> onnx.ModelProto:
    """The model as a proto without weight bytes: every initializer but small in-memory ones is
    turned into a typed graph input for the duration of the serialization, so nothing large is
    copied and a lazy weight is never read. The model is restored exactly (initializer order too),
    except that an initializer added without its type and shape (a pass's new constant) gets them
    from its tensor."""
    graph = model.graph
    inputs = list(graph.inputs)
    initializers = list(graph.initializers.items())
    for _, value in initializers:  # a detached one is a graph input in the copy, which needs its type
        tensor = value.const_value
        if tensor is not None and value.type is None:
            value.dtype = tensor.dtype
        if tensor is not None and value.shape is None:
            value.shape = ir.Shape(tensor.shape)
    kept = [(n, v) for n, v in initializers if _small_in_memory(v.const_value)]
    detached = [v for _, v in initializers if not _small_in_memory(v.const_value)]
    try:
        graph.initializers.clear()
        for name, v in kept:
            graph.initializers[name] = v
        graph.inputs.extend(v for v in detached if v not in inputs)
        return ir.serde.serialize_model(model)
    finally:
        graph.inputs.clear()
        graph.inputs.extend(inputs)
        graph.initializers.clear()
        for name, v in initializers:
            graph.initializers[name] = v


def infer_intermediate_shapes(model: ir.Model) -> bool:
    """Types and shapes of the intermediates from onnx's inference (lenient: no type check, no
    strict mode, no data propagation); whether a value changed. Raises what inference raises."""
    return infer_and_merge(model)[0]


def infer_and_merge(model: ir.Model) -> tuple[bool, onnx.ModelProto]:
    """:func:`infer_intermediate_shapes`, also returning the inferred weightless proto: once merged,
    it is the model's weightless proto (:func:`weightless_proto`) with the inferred types as
    value_info, so the export's validation checks it instead of serializing the model once more."""
    inferred = onnx.shape_inference.infer_shapes(weightless_proto(model), check_type=False, strict_mode=False,
                                                 data_prop=False)
    return _merge(model.graph, inferred.graph), inferred


def _merge(graph: ir.Graph, proto: onnx.GraphProto, seen: dict[bytes, tuple[Any, Any]] | None = None) -> bool:
    infos = {vi.name: vi.type for vi in (*proto.input, *proto.value_info, *proto.output)}
    seen = {} if seen is None else seen
    modified = False
    for value in graph.inputs:
        modified = _apply(value, infos.get(value.name), seen) or modified
    for node, node_proto in zip(graph, proto.node):
        for value in node.outputs:
            modified = _apply(value, infos.get(value.name), seen) or modified
        for attr in attribute_values(node):
            if attr.type not in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS):
                continue
            attr_proto = next((a for a in node_proto.attribute if a.name == attr.name), None)
            if attr_proto is None:
                continue
            if attr.type == ir.AttributeType.GRAPH:
                modified = _merge(attr.value, attr_proto.g, seen) or modified
            else:
                for body, body_proto in zip(attr.value, attr_proto.graphs):
                    modified = _merge(body, body_proto, seen) or modified
    return modified


def _apply(value: ir.Value, type_proto: onnx.TypeProto | None, seen: dict[bytes, tuple[Any, Any]]) -> bool:
    """What inference says of ``value``, where it says something (as onnx_ir's pass merges it: the
    inferred shape and element type replace the value's when they differ).

    ``seen``: the shape and type read from each distinct type proto, for comparing: a graph has few
    distinct types and reading one was most of the merge. A value that takes them gets a type of its
    own (onnx_ir's types are mutable), and a shape of its own unless the shape read is frozen."""
    if type_proto is None:
        return False
    key = type_proto.SerializeToString()
    read = seen.get(key)
    if read is None:
        read = seen[key] = (ir.serde.deserialize_type_proto_for_shape(type_proto),
                            ir.serde.deserialize_type_proto_for_type(type_proto))
    shape, inferred = read
    modified = False
    # ``is None`` first: comparing a Shape with None goes through a slow protocol isinstance
    if shape is not None and (value.shape is None or value.shape != shape):
        # a frozen shape (onnx_ir's deserializer freezes them) cannot change: every value may hold it
        value.shape = shape if getattr(shape, "frozen", False) else ir.serde.deserialize_type_proto_for_shape(type_proto)
        modified = True
    if inferred is not None:
        if value.type is None:
            value.type = ir.serde.deserialize_type_proto_for_type(type_proto)
            modified = True
        elif value.dtype != inferred.dtype and inferred.dtype is not None:
            value.dtype = inferred.dtype
            modified = True
    return modified


#: tensors whose bytes are in memory (a graph read from a file holds proto-backed ones); lazy
#: (``Weights``) and external ones are never read for a copy
_IN_MEMORY = (ir.Tensor, ir.serde.TensorProtoTensor)


def _small_in_memory(tensor: Any) -> bool:
    return type(tensor) in _IN_MEMORY and tensor.nbytes <= SMALL_INITIALIZER_BYTES


__all__ = ["SMALL_INITIALIZER_BYTES", "infer_and_merge", "infer_intermediate_shapes", "weightless_proto"]

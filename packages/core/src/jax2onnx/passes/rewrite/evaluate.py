"""Computing a few nodes of a graph on their own, with onnx's reference evaluator: how a rule reads
what a piece of the graph computes (an elementwise chain at probe points, rotary table rows) without
a runtime. The nodes are copied into a standalone model whose inputs are the fed values and whose
initializers are the constants the nodes read."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir

from ...ir.constants import constant_tensor


def evaluate(nodes: Sequence[ir.Node], outputs: Sequence[ir.Value], opset: int, *,
             feeds: Mapping[ir.Value, np.ndarray] | None = None,
             constants: Callable[[ir.Value], ir.Tensor | None] = constant_tensor) -> list[np.ndarray] | None:
    """The float ``outputs`` of ``nodes`` (in graph order), with ``feeds`` as graph inputs and
    every other value the nodes read taken from ``constants``; None when such a value is not a
    constant or the evaluator cannot run the nodes."""
    from onnx.reference import ReferenceEvaluator

    feeds = feeds or {}
    names: dict[int, str] = {}

    def name(value: ir.Value) -> str:
        return names.setdefault(id(value), f"v{len(names)}")

    inputs = [onnx.helper.make_tensor_value_info(name(v), onnx.helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
              for v, a in feeds.items()]
    initializers, protos = [], []
    for node in nodes:
        for value in node.inputs:
            if value is None or id(value) in names:
                continue
            tensor = constants(value)
            if tensor is None:
                return None
            proto = ir.serde.serialize_tensor(tensor)
            proto.name = name(value)
            initializers.append(proto)
        proto = ir.serde.serialize_node(node)
        del proto.input[:], proto.output[:]
        proto.input.extend("" if v is None else name(v) for v in node.inputs)
        proto.output.extend(name(v) for v in node.outputs)
        protos.append(proto)
    outs = [onnx.helper.make_tensor_value_info(name(v), onnx.TensorProto.FLOAT, None) for v in outputs]
    graph = onnx.helper.make_graph(protos, "evaluate", inputs, outs, initializer=initializers)
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    try:
        with np.errstate(all="ignore"):
            return list(ReferenceEvaluator(model).run(None, {name(v): a for v, a in feeds.items()}))
    except Exception:  # noqa: BLE001 - nodes the evaluator cannot run are read as unknown
        return None

"""Route around (op, dtype) pairs onnxruntime's CPU provider has no kernel for.

A valid ONNX model can still fail to load in onnxruntime ("Could not find an implementation for
Where(16) node with name ..."): the spec allows ``Where`` on bfloat16 and uint64, ``MatMul`` on
bfloat16, ``Max`` on int16, ``Pad`` on int16, ``Einsum`` on int8, but the CPU provider implements
fewer types (and ``ScatterND`` refuses bool with reduction max/min only when it runs), and fewer in
older releases. The missing pairs come from the export target's kernel table (``Target.runtime()``,
a :class:`jax2onnx.ir.runtime.Runtime`: for the built-in targets the installed onnxruntime's measured
or probed table); the pass is given it and reads no runtime of its own. A scatter op with a
reduction is its own entry (``ScatterND:max``).

Rules:
- a node whose op is in the table and whose tensor type (the type its value inputs share) is
  missing gets Casts: its value inputs (the table's ``typed_inputs`` positions, else every input)
  go to the narrowest supported dtype that holds every value exactly
  (``jax2onnx.dtypes.carrier``; for data movement and the wrapping sums/products, uint64 may
  travel as int64: the same bits) and its outputs of that type are cast back, so readers see the
  original dtype;
- bool outputs (comparisons) stay as they are; a graph output keeps its name;
- a ``MatMul`` of a matrix that may have no rows by a vector becomes one by a one-column matrix
  where the runtime fails the vector form (``MatMul:vector`` in the table's ``inexact``);
- every graph is handled (function and control-flow bodies included).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx_ir as ir

from ..dtypes import carrier
from .manager import all_graphs

#: ops whose result does not depend on the order of the values, only on their bits modulo 2**64
#: (data movement; sums and products wrap the same in int64): uint64 may travel as int64
_ORDER_FREE = frozenset({
    "Where", "Identity", "Pad", "Tile", "Expand", "Concat", "Slice", "Transpose", "Reshape", "Unsqueeze", "Gather",
    "GatherElements", "ScatterND", "ScatterElements", "ScatterND:add", "ScatterND:mul", "ScatterElements:add",
    "ScatterElements:mul", "Einsum", "ReduceSum", "ReduceProd", "CumSum",
})
_WITH_REDUCTION = frozenset({"ScatterND", "ScatterElements"})


def missing_kernels(opset: int | None, runtime: Any) -> dict[str, frozenset]:
    """(op or ``op:reduction``) -> the dtypes ``runtime`` (the export target's kernel table,
    ``Target.runtime()``) has no kernel for at ``opset`` (:meth:`jax2onnx.ir.runtime.Runtime.missing`)."""
    return runtime.missing(opset)


def table_key(node: ir.Node) -> str:
    """The table entry of ``node``: its op, with a scatter's reduction (``ScatterND:max``)."""
    if node.op_type in _WITH_REDUCTION:
        attr = node.attributes.get("reduction")
        reduction = attr.as_string() if attr is not None else "none"
        if reduction != "none":
            return f"{node.op_type}:{reduction}"
    return node.op_type


def _value_inputs(node: ir.Node, key: str, runtime: Any) -> list[int]:
    """Indices of the inputs typed by the op's shared type parameter (Where's condition, Pad's
    pads, a scatter's indices are not)."""
    positions = runtime.typed_inputs(key)
    if positions is None:
        positions = range(1 if node.op_type == "Where" else 0, len(node.inputs))
    return [i for i in positions if i < len(node.inputs) and node.inputs[i] is not None]


def _cast(value: ir.Value, dtype: ir.DataType, name: str) -> ir.Node:
    out = ir.Value(name=name, type=ir.TensorType(dtype), shape=value.shape)
    return ir.Node("", "Cast", [value], [ir.AttrInt64("to", int(dtype))], outputs=[out], name=f"{name}_node")


def _may_have_no_rows(value: ir.Value) -> bool:
    """Unknown shape, or a leading dim that is symbolic or 0 (a rank-1 ``value`` has no rows to
    lack: the column form is the same dot product then)."""
    shape = value.shape
    return shape is None or (len(shape) >= 2 and any(not isinstance(d, int) or d == 0 for d in list(shape)[:-1]))


def _matrix_times_vector(graph: ir.Graph, node: ir.Node, runtime: Any, fresh) -> bool:
    """``MatMul(a, v)`` of a vector ``v`` as ``Squeeze(MatMul(a, Unsqueeze(v, -1)), -1)`` where
    the runtime fails that form for an ``a`` without rows (``MatMul:vector``, onnxruntime 1.31)."""
    a, v = node.inputs[0], node.inputs[1]
    if v is None or v.shape is None or len(v.shape) != 1 or a is None:
        return False
    if v.type is None or runtime.supports("MatMul:vector", v.type.dtype.numpy()) or not _may_have_no_rows(a):
        return False
    axes = ir.Value(name=fresh("minus_one"), type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([1]))
    const = ir.Node("", "Constant", [], [ir.AttrTensor("value", ir.tensor(np.array([-1], np.int64)))],
                    outputs=[axes], name=f"{axes.name}_node")
    column = ir.Value(name=fresh("column"), type=v.type, shape=ir.Shape([v.shape[0], 1]))
    unsqueeze = ir.Node("", "Unsqueeze", [v, axes], outputs=[column], name=f"{column.name}_node")
    graph.insert_before(node, [const, unsqueeze])
    node.replace_input_with(1, column)
    out = node.outputs[0]
    squeezed = ir.Value(name=fresh(out.name or "out"), type=out.type, shape=out.shape)
    _read_through(graph, node, out, ir.Node("", "Squeeze", [out, axes], outputs=[squeezed],
                                             name=f"{squeezed.name}_node"), "column")
    out.shape = None
    return True


def _read_through(graph: ir.Graph, node: ir.Node, out: ir.Value, after: ir.Node, suffix: str) -> None:
    """Insert ``after`` (which reads ``out``) behind ``node`` and give its output every reader of
    ``out``; a graph output keeps its name (``out`` takes ``<name>_<suffix>``)."""
    new = after.outputs[0]
    for user, j in list(out.uses()):
        if user is not after:
            user.replace_input_with(j, new)
    graph.insert_after(node, after)
    outputs = list(graph.outputs)
    if any(o is out for o in outputs):
        k = next(k for k, o in enumerate(outputs) if o is out)
        name = out.name
        out.name, new.name = f"{name}_{suffix}", name
        graph.outputs[k] = new


class KernelCoveragePass(ir.passes.InPlacePass):
    """``runtime``: the kernel table of the target the model is for (``Target.runtime()``)."""

    produces_dead_code = True

    def __init__(self, runtime: Any) -> None:
        super().__init__()
        self.runtime = runtime

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        runtime = self.runtime
        opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
        table = runtime.missing(opset)
        modified = False
        counter = [0]

        def fresh(base: str) -> str:
            counter[0] += 1
            return f"{base}_ortcast{counter[0]}"

        for graph in list(all_graphs(model)):
            for node in list(graph):
                if node.op_type == "MatMul" and node.domain in ("", "ai.onnx"):
                    modified |= _matrix_times_vector(graph, node, runtime, fresh)
                key = table_key(node)
                missing = table.get(key)
                if missing is None or node.domain not in ("", "ai.onnx"):
                    continue
                idx = _value_inputs(node, key, runtime)
                typed = [node.inputs[i] for i in idx]
                if not typed or typed[0].type is None:
                    continue
                dtype = typed[0].type.dtype
                np_dtype = dtype.numpy()
                if np_dtype not in missing:
                    continue
                supported = runtime.dtypes(key, opset)  # what the schema takes and a kernel runs
                try:
                    wide = carrier(np_dtype, supported, keep_order=key not in _ORDER_FREE)
                except NotImplementedError:
                    continue  # nothing holds it exactly: leave the node (the export is still valid ONNX)
                wide_ir = ir.DataType.from_numpy(wide)
                for i in idx:
                    cast = _cast(node.inputs[i], wide_ir, fresh(node.inputs[i].name or "in"))
                    graph.insert_before(node, cast)
                    node.replace_input_with(i, cast.outputs[0])
                for out in node.outputs:
                    if out.type is None or out.type.dtype != dtype:
                        continue  # a bool result of a comparison
                    back = ir.Value(name=fresh(out.name or "out"), type=ir.TensorType(dtype), shape=out.shape)
                    _read_through(graph, node, out, ir.Node("", "Cast", [out], [ir.AttrInt64("to", int(dtype))],
                                                            outputs=[back], name=f"{back.name}_node"), "carrier")
                    out.type = ir.TensorType(wide_ir)
                modified = True
        return ir.passes.PassResult(model, modified)

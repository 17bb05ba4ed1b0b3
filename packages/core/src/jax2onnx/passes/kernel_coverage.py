"""Route around (op, dtype) pairs onnxruntime's CPU provider has no kernel for.

A valid ONNX model can still fail to load in onnxruntime ("Could not find an implementation for
Where(16) node with name ..."): the spec allows ``Where`` on bfloat16 and uint64, ``MatMul`` on
bfloat16, ``Max`` on int16, ``Pad`` on int16, ``Einsum`` on int8, but the CPU provider implements
fewer types (and ``ScatterND`` refuses bool with reduction max/min only when it runs). The table of
missing pairs, ``ort_kernels.json``, is measured by ``bench/ort_kernels.py``; a scatter op with a
reduction is its own entry (``ScatterND:max``).

Rules:
- a node whose op is in the table and whose tensor type (the type its value inputs share) is
  missing gets Casts: its value inputs (the table's ``typed_inputs`` positions, else every input)
  go to the narrowest supported dtype that holds every value exactly
  (``jax2onnx.dtypes.carrier``; for data movement and the wrapping sums/products, uint64 may
  travel as int64: the same bits) and its outputs of that type are cast back, so readers see the
  original dtype;
- bool outputs (comparisons) stay as they are; a graph output keeps its name;
- every graph is handled (function and control-flow bodies included).
"""

from __future__ import annotations

import functools
import json
import os

import numpy as np
import onnx_ir as ir

from ..dtypes import carrier
from .manager import all_graphs

_TABLE_FILE = os.path.join(os.path.dirname(os.path.dirname(__file__)), "ir", "ort_kernels.json")


#: ops whose result does not depend on the order of the values, only on their bits modulo 2**64
#: (data movement; sums and products wrap the same in int64): uint64 may travel as int64
_ORDER_FREE = frozenset({
    "Where", "Identity", "Pad", "Tile", "Expand", "Concat", "Slice", "Transpose", "Reshape", "Unsqueeze", "Gather",
    "GatherElements", "ScatterND", "ScatterElements", "ScatterND:add", "ScatterND:mul", "ScatterElements:add",
    "ScatterElements:mul", "Einsum", "ReduceSum", "ReduceProd", "CumSum",
})
_WITH_REDUCTION = frozenset({"ScatterND", "ScatterElements"})


@functools.lru_cache(maxsize=1)
def _doc() -> dict:
    with open(_TABLE_FILE, encoding="utf-8") as f:
        return json.load(f)


@functools.lru_cache(maxsize=1)
def _typed_inputs() -> dict[str, tuple[int, ...]]:
    return {op: tuple(pos) for op, pos in _doc().get("typed_inputs", {}).items()}


@functools.cache
def missing_kernels(opset: int | None = None) -> dict[str, frozenset[np.dtype]]:
    """(op or ``op:reduction``) -> the dtypes onnxruntime's CPU provider has no kernel for, at
    ``opset`` (older op versions have older kernels: Pad-13 has no bfloat16); ``None``: the table's
    own opset, which newer opsets share."""
    doc = _doc()
    table = dict(doc["missing"])
    probed = sorted(int(o) for o in doc.get("by_opset", {}))
    if opset is not None and opset < doc["opset"] and probed:
        nearest = max([o for o in probed if o <= opset], default=probed[0])
        table.update(doc["by_opset"][str(nearest)])
    return {op: frozenset(_np(name) for name in names) for op, names in table.items() if names}


def _np(name: str) -> np.dtype:
    return np.dtype(name)  # "bfloat16" resolves once ml_dtypes is loaded (jax2onnx.dtypes loads it)


_ALL = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16",
        "uint32", "uint64", "bool")


def table_key(node: ir.Node) -> str:
    """The table entry of ``node``: its op, with a scatter's reduction (``ScatterND:max``)."""
    if node.op_type in _WITH_REDUCTION:
        attr = node.attributes.get("reduction")
        reduction = attr.as_string() if attr is not None else "none"
        if reduction != "none":
            return f"{node.op_type}:{reduction}"
    return node.op_type


def _value_inputs(node: ir.Node, key: str) -> list[int]:
    """Indices of the inputs typed by the op's shared type parameter (Where's condition, Pad's
    pads, a scatter's indices are not)."""
    positions = _typed_inputs().get(key)
    if positions is None:
        positions = range(1 if node.op_type == "Where" else 0, len(node.inputs))
    return [i for i in positions if i < len(node.inputs) and node.inputs[i] is not None]


def _cast(value: ir.Value, dtype: ir.DataType, name: str) -> ir.Node:
    out = ir.Value(name=name, type=ir.TensorType(dtype), shape=value.shape)
    return ir.Node("", "Cast", [value], [ir.AttrInt64("to", int(dtype))], outputs=[out], name=f"{name}_node")


class KernelCoveragePass(ir.passes.InPlacePass):
    def call(self, model: ir.Model) -> ir.passes.PassResult:
        table = missing_kernels(model.opset_imports.get("", model.opset_imports.get("ai.onnx")))
        modified = False
        counter = [0]

        def fresh(base: str) -> str:
            counter[0] += 1
            return f"{base}_ortcast{counter[0]}"

        for graph in list(all_graphs(model)):
            for node in list(graph):
                key = table_key(node)
                missing = table.get(key)
                if missing is None or node.domain not in ("", "ai.onnx"):
                    continue
                idx = _value_inputs(node, key)
                typed = [node.inputs[i] for i in idx]
                if not typed or typed[0].type is None:
                    continue
                dtype = typed[0].type.dtype
                np_dtype = dtype.numpy()
                if np_dtype not in missing:
                    continue
                supported = {_np(n) for n in _ALL} - missing
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
                    uses = list(out.uses())
                    for user, j in uses:
                        user.replace_input_with(j, back)
                    cast_back = ir.Node("", "Cast", [out], [ir.AttrInt64("to", int(dtype))], outputs=[back],
                                        name=f"{back.name}_node")
                    graph.insert_after(node, cast_back)
                    out.type = ir.TensorType(wide_ir)
                    outputs = list(graph.outputs)
                    if any(o is out for o in outputs):
                        k = next(k for k, o in enumerate(outputs) if o is out)
                        name = out.name
                        out.name, back.name = f"{name}_carrier", name
                        graph.outputs[k] = back
                modified = True
        return ir.passes.PassResult(model, modified)

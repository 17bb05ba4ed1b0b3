"""What TensorRT 10's ONNX parser cannot take, found in a graph: the lint behind
``jax2onnx check --target tensorrt model.onnx`` and the last step of ``to_onnx(..., target="tensorrt")``.

The operator set and opset range are data (``jax2onnx/ir/tensorrt_ops.json``, generated from
onnx-tensorrt's operator table by ``packages/core/tools/tensorrt_ops.py``). Restrictions from that
table that jax2onnx's graphs can run into are checked here:
- float64 tensors (the parser casts DOUBLE down with clamping: an export that asks for float64
  would silently compute in float32);
- ScatterND/ScatterElements with a ``reduction``;
- a Loop with scan outputs whose trip count is not a constant;
- LayerNormalization read beyond its first output;
- element types: an op's data input (its first) of a type the table does not list for that op
  (integer CumSum or MatMul, an int16 tensor: TensorRT has no kernel); ``target="tensorrt"``
  first rewrites what it can exactly (:mod:`.tensorrt_forms`);
- inputs the table says must be initializers (Slice/Pad/Reduce* ``axes``, CumSum ``axis``,
  OneHot ``depth``, TopK ``K``): a value computed at run time is named.

The page spells one INT64 as "INF64" (ConstantOfShape); the loader reads it as INT64.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import onnx
import onnx_ir as ir

from ...ir.constants import constant_ints, constant_tensor
from ...passes.manager import all_graphs

_TABLE = Path(__file__).resolve().parent / "tensorrt_ops.json"


@functools.cache
def tensorrt_table() -> dict:
    table = json.loads(_TABLE.read_text())
    table["supported"] = {op: ["INT64" if t == "INF64" else t for t in types] for op, types in table["supported"].items()}
    return table


#: The table's names for ONNX element types; a type without one is none TensorRT has.
_TYPE_NAMES = {ir.DataType.FLOAT: "FP32", ir.DataType.FLOAT16: "FP16", ir.DataType.BFLOAT16: "BF16",
               ir.DataType.INT32: "INT32", ir.DataType.INT64: "INT64", ir.DataType.BOOL: "BOOL",
               ir.DataType.UINT8: "UINT8", ir.DataType.INT8: "INT8", ir.DataType.INT4: "INT4",
               ir.DataType.FLOAT8E4M3FN: "FP8"}

#: Inputs TensorRT's table says must be initializers (build-time constants): op -> input positions.
_CONSTANT_INPUTS = {"Slice": (3,), "Pad": (3,), "CumSum": (1,), "OneHot": (1,), "TopK": (1,),
                    **{op: (1,) for op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax",
                                           "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare")}}


def _type_finding(op: str, types: list[str], node: ir.Node, trt: str) -> str | None:
    """Why the parser cannot take ``node``'s data input (its first), or None."""
    x = node.inputs[0] if node.inputs else None
    if not types or x is None or x.dtype is None or x.dtype == ir.DataType.DOUBLE:
        return None  # no types listed; float64 has its own finding
    name = _TYPE_NAMES.get(x.dtype)
    if name is None:
        return f"{x.dtype.name.lower()} tensors are not among {trt}'s data types"
    if name not in types:
        return f"{op} on {x.dtype.name.lower()} is not supported by {trt} ({op} takes {', '.join(types)})"
    return None


@dataclasses.dataclass(frozen=True)
class Finding:
    op: str  # the op type ("DFT"), or "float64" for a model-wide finding
    node: str  # the node's name ("" for model-wide findings)
    problem: str

    def __str__(self) -> str:
        where = f" (node {self.node})" if self.node else ""
        return f"{self.op}{where}: {self.problem}"


def check_tensorrt(model: ir.Model | onnx.ModelProto) -> list[Finding]:
    """Every node and setting of ``model`` TensorRT 10's ONNX parser cannot take (empty: none). The
    opset range, which the table also holds, is the tensorrt target's (every target checks its own
    range: :meth:`jax2onnx.targets.Target.findings`)."""
    if isinstance(model, onnx.ModelProto):
        model = ir.from_proto(model)
    table = tensorrt_table()
    trt = f"TensorRT {table['tensorrt']}'s ONNX parser"
    findings: list[Finding] = []
    supported = table["supported"]
    seen_double: set[str] = set()
    for graph in all_graphs(model):
        for node in graph:
            op = node.op_type
            name = node.name or ""
            if node.domain not in ("", "ai.onnx"):
                findings.append(Finding(op, name, f"custom domain {node.domain!r} is not in {trt} (no plugin known)"))
                continue
            if op not in supported:
                findings.append(Finding(op, name, f"{op} is not supported by {trt}"))
                continue
            for v in (*node.inputs, *node.outputs):
                if v is not None and v.dtype == ir.DataType.DOUBLE and op not in seen_double:
                    seen_double.add(op)
                    findings.append(Finding(op, name, f"float64 {op}: {trt} casts DOUBLE down to float32; "
                                                      "export without enable_double_precision"))
            problem = _type_finding(op, supported[op], node, trt)
            if problem:
                findings.append(Finding(op, name, problem))
            for i in _CONSTANT_INPUTS.get(op, ()):
                if i < len(node.inputs) and node.inputs[i] is not None and constant_tensor(node.inputs[i]) is None:
                    findings.append(Finding(op, name, f"{op}'s input {i} ({node.inputs[i].name}) must be an initializer "
                                                      f"in {trt}, it is computed at run time"))
            if op in ("ScatterND", "ScatterElements") and "reduction" in node.attributes \
                    and node.attributes["reduction"].value != "none":
                findings.append(Finding(op, name, f"{op} with reduction={node.attributes['reduction'].value!r} "
                                                  f"is not supported by {trt}"))
            if op == "Loop" and len(node.outputs) > len(node.inputs) - 2:
                trip = node.inputs[0] if node.inputs else None
                if trip is None or constant_ints(trip) is None:
                    findings.append(Finding(op, name, f"Loop with scan outputs needs a constant trip count in {trt}"))
            if op == "LayerNormalization" and any(o.uses() for o in node.outputs[1:]):
                findings.append(Finding(op, name, f"only LayerNormalization's first output is supported by {trt}"))
    return findings


__all__ = ["Finding", "check_tensorrt", "tensorrt_table"]

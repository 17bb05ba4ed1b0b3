"""What TensorRT 10's ONNX parser cannot take, found in a graph: the lint behind
``jax2onnx check --target tensorrt model.onnx`` and the last step of ``to_onnx(..., target="tensorrt")``.

The operator set and opset range are data (``jax2onnx/ir/tensorrt_ops.json``, generated from
onnx-tensorrt's operator table by ``packages/core/tools/tensorrt_ops.py``). Restrictions from that
table that jax2onnx's graphs can run into are checked here:
- float64 tensors (the parser casts DOUBLE down with clamping: an export that asks for float64
  would silently compute in float32);
- ScatterND/ScatterElements with a ``reduction``;
- a Loop with scan outputs whose trip count is not a constant;
- LayerNormalization read beyond its first output.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import onnx
import onnx_ir as ir

from ...ir.constants import constant_ints
from ..manager import all_graphs

_TABLE = Path(__file__).resolve().parents[2] / "ir" / "tensorrt_ops.json"


@functools.cache
def tensorrt_table() -> dict:
    return json.loads(_TABLE.read_text())


@dataclasses.dataclass(frozen=True)
class Finding:
    op: str  # the op type ("DFT"), or "opset"/"float64" for model-wide findings
    node: str  # the node's name ("" for model-wide findings)
    problem: str

    def __str__(self) -> str:
        where = f" (node {self.node})" if self.node else ""
        return f"{self.op}{where}: {self.problem}"


def check_tensorrt(model: ir.Model | onnx.ModelProto) -> list[Finding]:
    """Every node and setting of ``model`` TensorRT 10's ONNX parser cannot take (empty: none)."""
    if isinstance(model, onnx.ModelProto):
        model = ir.from_proto(model)
    table = tensorrt_table()
    trt = f"TensorRT {table['tensorrt']}'s ONNX parser"
    findings: list[Finding] = []
    opset = int(model.opset_imports.get("", model.opset_imports.get("ai.onnx", 0)))
    if not table["opset_min"] <= opset <= table["opset_max"]:
        findings.append(Finding("opset", "", f"opset {opset} is outside {trt}'s {table['opset_min']}-"
                                f"{table['opset_max']}; export with opset={table['opset_max']}"))
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

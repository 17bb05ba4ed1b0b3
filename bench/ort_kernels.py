"""Probe which (op, dtype) pairs onnxruntime's CPU provider implements; writes the table core reads.

    python bench/ort_kernels.py            # rewrites packages/core/src/jax2onnx/ort_kernels.json

For each op whose tensor inputs and output share one type parameter (elementwise, binary,
variadic, MatMul, Where's value inputs, ...) and each dtype JAX has, a one-node model is created
and given to an InferenceSession; "missing" means onnxruntime answered that it has no kernel
(NOT_IMPLEMENTED) — that is what ``jax2onnx.passes.KernelCoveragePass`` routes around with casts.
Probed at the opset ``to_onnx`` writes by default.
"""

from __future__ import annotations

import json
import os

import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(__file__), "..", "packages", "core", "src", "jax2onnx", "ort_kernels.json")

DTYPES = {
    "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16, "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE, "int8": TensorProto.INT8, "int16": TensorProto.INT16, "int32": TensorProto.INT32,
    "int64": TensorProto.INT64, "uint8": TensorProto.UINT8, "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32,
    "uint64": TensorProto.UINT64, "bool": TensorProto.BOOL,
}
UNARY = ["Abs", "Neg", "Sqrt", "Exp", "Log", "Tanh", "Sigmoid", "Relu", "Floor", "Ceil", "Round", "Sign",
         "Erf", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Reciprocal", "Identity", "Not",
         "BitwiseNot", "Softplus", "IsNaN", "IsInf"]
BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Mod", "MatMul", "Equal", "Less", "Greater",
          "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor"]
#: ops whose first output is bool whatever T is
BOOL_OUT = {"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "IsNaN", "IsInf"}


def probe(op: str, n_in: int, elem: int, opset: int) -> bool | None:
    """True: runs; False: onnxruntime has no kernel; None: the schema does not allow the type."""
    out_t = TensorProto.BOOL if op in BOOL_OUT else elem
    inputs = [helper.make_tensor_value_info(f"x{i}", elem, [2, 2]) for i in range(n_in)]
    attrs = {"fmod": 1} if op == "Mod" and elem in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16) else {}
    if op == "Where":
        inputs = [helper.make_tensor_value_info("c", TensorProto.BOOL, [2, 2])] + [
            helper.make_tensor_value_info(f"x{i}", elem, [2, 2]) for i in range(2)]
    node = helper.make_node(op, [i.name for i in inputs], ["y"], **attrs)
    graph = helper.make_graph([node], "probe", inputs, [helper.make_tensor_value_info("y", out_t, [2, 2])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    try:
        onnx.checker.check_model(model, full_check=True)
    except Exception:  # noqa: BLE001 - the schema rejects this type: not a kernel question
        return None
    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        return True
    except Exception as exc:  # noqa: BLE001
        return False if "NOT_IMPLEMENTED" in str(exc) or "Could not find an implementation" in str(exc) else None


def main() -> None:
    opset = 21  # IR 10: loads in every onnxruntime this probe runs on; kernels are the same at 23
    table: dict[str, list[str]] = {}
    for op, n in [*((o, 1) for o in UNARY), *((o, 2) for o in BINARY), ("Where", 3), ("Sum", 3), ("Mean", 3)]:
        missing = [name for name, elem in DTYPES.items() if probe(op, n, elem, opset) is False]
        if missing:
            table[op] = missing
    doc = {"onnxruntime": ort.__version__, "opset": opset, "missing": table}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(doc, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()

"""Probe which (op, dtype) pairs onnxruntime's CPU provider implements; writes the table core reads.

    python bench/ort_kernels.py            # rewrites packages/core/src/jax2onnx/ir/ort_kernels.json

For each op whose tensor inputs and output share one type parameter (elementwise, binary,
variadic, MatMul, Where's value inputs, ...) and each dtype JAX has, a one-node model is created
and given to an InferenceSession; "missing" means onnxruntime answered that it has no kernel
(NOT_IMPLEMENTED) — that is what ``jax2onnx.passes.KernelCoveragePass`` routes around with casts.
Probed at opset 21 (the kernels ``to_onnx``'s default opset gets) and, as differences from that
table, at each older opset down to jax2onnx.ir.opsets.MIN_OPSET (older op versions have older kernels).
"""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import onnxruntime as ort
from jax2onnx.ir.opsets import MIN_OPSET
from onnx import TensorProto, helper

OUT = os.path.join(os.path.dirname(__file__), "..", "packages", "core", "src", "jax2onnx", "ir", "ort_kernels.json")

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


#: Ops with inputs besides their type parameter T (indices, shapes, axes): T inputs are fed, the
#: others are constants here. op (or op:reduction) -> (T inputs' shapes by position, other inputs'
#: (position, int64 value), attributes, whether the output is T). The positions of the T inputs of
#: ops with other inputs go into the table: KernelCoveragePass casts exactly those.
StructSpec = tuple[dict[int, list[int]], dict[int, list], dict, bool]
STRUCTURED: dict[str, StructSpec] = {
    "Clip": ({0: [2, 2], 1: [], 2: []}, {}, {}, True),
    "Pad": ({0: [2, 2], 2: []}, {1: [0, 1, 0, 1]}, {}, True),
    "Tile": ({0: [2, 2]}, {1: [2, 1]}, {}, True),
    "Expand": ({0: [2, 1]}, {1: [2, 2]}, {}, True),
    "Einsum": ({0: [2, 2], 1: [2, 2]}, {}, {"equation": "ij,jk->ik"}, True),
    "CumSum": ({0: [2, 2]}, {1: 1}, {}, True),
    "TopK": ({0: [2, 2]}, {1: [1]}, {}, True),
    "ReduceSum": ({0: [2, 2]}, {1: [1]}, {}, True),
    "ReduceProd": ({0: [2, 2]}, {1: [1]}, {}, True),
    "ReduceMax": ({0: [2, 2]}, {1: [1]}, {}, True),
    "ReduceMin": ({0: [2, 2]}, {1: [1]}, {}, True),
    "ArgMax": ({0: [2, 2]}, {}, {"axis": 1}, False),
    "ArgMin": ({0: [2, 2]}, {}, {"axis": 1}, False),
    "MaxPool": ({0: [1, 1, 2, 2]}, {}, {"kernel_shape": [1, 1]}, True),
    "Gather": ({0: [2, 2]}, {1: [1, 0]}, {}, True),
    "GatherElements": ({0: [2, 2]}, {1: [[1, 0], [0, 0]]}, {}, True),
    "Concat": ({0: [2, 2], 1: [2, 2]}, {}, {"axis": 0}, True),
    "Slice": ({0: [2, 2]}, {1: [0], 2: [1]}, {}, True),
    "Transpose": ({0: [2, 2]}, {}, {}, True),
    "Reshape": ({0: [2, 2]}, {1: [4]}, {}, True),
    "Unsqueeze": ({0: [2, 2]}, {1: [0]}, {}, True),
    "Range": ({0: [], 1: [], 2: []}, {}, {}, True),
    # the float work of models (what jax2onnx.precision's float16/bfloat16 pass relies on)
    "Gemm": ({0: [2, 2], 1: [2, 2], 2: [2]}, {}, {}, True),
    "Conv": ({0: [1, 1, 3, 3], 1: [1, 1, 1, 1], 2: [1]}, {}, {}, True),
    "ConvTranspose": ({0: [1, 1, 3, 3], 1: [1, 1, 1, 1], 2: [1]}, {}, {}, True),
    "AveragePool": ({0: [1, 1, 2, 2]}, {}, {"kernel_shape": [1, 1]}, True),
    "LayerNormalization": ({0: [2, 2], 1: [2], 2: [2]}, {}, {}, True),
    "BatchNormalization": ({0: [1, 2, 2], 1: [2], 2: [2], 3: [2], 4: [2]}, {}, {}, True),
    "Softmax": ({0: [2, 2]}, {}, {}, True),
    "Gelu": ({0: [2, 2]}, {}, {}, True),
    **{f"ScatterND{'' if r == 'none' else ':' + r}": ({0: [2, 2], 2: [1, 2]}, {1: [[0]]}, {"reduction": r}, True)
       for r in ("none", "add", "mul", "max", "min")},
    **{f"ScatterElements{'' if r == 'none' else ':' + r}": (
        {0: [2, 2], 2: [1, 2]}, {1: [[0, 1]]}, {"reduction": r, "axis": 0}, True)
       for r in ("none", "add", "mul", "max", "min")},
}

_NP = {"float16": "float16", "bfloat16": None, "float32": "float32", "float64": "float64", "int8": "int8",
       "int16": "int16", "int32": "int32", "int64": "int64", "uint8": "uint8", "uint16": "uint16", "uint32": "uint32",
       "uint64": "uint64", "bool": "bool"}


def _session(model: onnx.ModelProto, feeds: dict | None = None) -> bool | None:
    """True: loads (and, given feeds, runs); False: onnxruntime has no kernel; None: the schema
    does not allow the type."""
    try:
        # strict inference checks the types against the schema (outputs may leave their shape open)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    except Exception:  # noqa: BLE001 - the schema rejects this type: not a kernel question
        return None
    try:
        opts = ort.SessionOptions()
        opts.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        if feeds is not None:
            sess.run(None, feeds)
        return True
    except Exception as exc:  # noqa: BLE001
        text = str(exc)
        # a load-time NOT_IMPLEMENTED, or a kernel that refuses the type when it runs
        # (ScatterND's max/min reductions on bool)
        missing = "NOT_IMPLEMENTED" in text or "Could not find an implementation" in text or "not supported" in text
        return False if missing else None


def probe(op: str, n_in: int, elem: int, opset: int) -> bool | None:
    """An elementwise/variadic op whose inputs and output share T."""
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
    return _session(model)


def probe_structured(key: str, dtype: str, opset: int) -> bool | None:
    """An op of STRUCTURED, built and run once on zeros (some kernels refuse a type only when they run)."""
    op = key.split(":")[0]
    typed, others, attrs, same_out = STRUCTURED[key]
    if op in ("ReduceMax", "ReduceMin", "ReduceProd") and opset < 18:  # axes were an attribute then
        others, attrs = {}, {**attrs, "axes": others[1]}
    elem = DTYPES[dtype]
    n = max([*typed, *others]) + 1
    names, inputs, inits, feeds = [], [], [], {}
    for i in range(n):
        if i in typed:
            name = f"x{i}"
            inputs.append(helper.make_tensor_value_info(name, elem, typed[i]))
            if _NP[dtype] is not None:
                feeds[name] = np.ones(typed[i], dtype=_NP[dtype]) if op == "Range" and i == 2 else np.zeros(typed[i], dtype=_NP[dtype])
        else:
            name = f"c{i}"
            value = np.asarray(others[i], dtype=np.int64)
            inits.append(helper.make_tensor(name, TensorProto.INT64, value.shape, value.ravel().tolist()))
        names.append(name)
    outputs = ["y", "i"] if op == "TopK" else ["y"]
    node = helper.make_node(op, names, outputs, **attrs)
    out_elem = elem if same_out else TensorProto.INT64
    outs = [helper.make_tensor_value_info("y", out_elem, None)]
    if op == "TopK":
        outs.append(helper.make_tensor_value_info("i", TensorProto.INT64, None))
    graph = helper.make_graph([node], "probe", inputs, outs, initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    # bfloat16 cannot be fed from numpy here: that type is probed at load time only
    return _session(model, feeds if _NP[dtype] is not None else None)


#: order-based ops whose bool form is their uint8 form (False < True like 0 < 1)
BOOL_AS_UINT8 = frozenset({"Max", "Min", "ReduceMax", "ReduceMin", "ArgMax", "ArgMin", "TopK", "Clip"})


def _missing(op: str, result: bool | None, dtype: str, float32_result: bool | None, uint8_result: bool | None) -> bool:
    """No kernel; or a type the op's schema leaves out while a carrier that holds it exactly runs:
    a 16-bit float (Einsum has no bfloat16) in float32, a bool of an order-based op (a bool Max,
    which the opset-17 ScatterND max emulation forms) in uint8."""
    if result is False:
        return True
    if result is None and dtype in ("float16", "bfloat16"):
        return float32_result is True
    return result is None and dtype == "bool" and op in BOOL_AS_UINT8 and uint8_result is True


def measure(opset: int) -> dict[str, list[str]]:
    table: dict[str, list[str]] = {}
    for op, n in [*((o, 1) for o in UNARY), *((o, 2) for o in BINARY), ("Where", 3), ("Sum", 3), ("Mean", 3)]:
        f32, u8 = probe(op, n, TensorProto.FLOAT, opset), probe(op, n, TensorProto.UINT8, opset)
        missing = [name for name, elem in DTYPES.items() if _missing(op, probe(op, n, elem, opset), name, f32, u8)]
        if missing:
            table[op] = missing
    for key in STRUCTURED:
        f32, u8 = probe_structured(key, "float32", opset), probe_structured(key, "uint8", opset)
        missing = [name for name in DTYPES
                   if _missing(key.split(":")[0], probe_structured(key, name, opset), name, f32, u8)]
        if missing:
            table[key] = missing
    return table


def main() -> None:
    opset = 21  # IR 10: loads in every onnxruntime this probe runs on; kernels are the same at 23
    table = measure(opset)
    # Older opsets pick older kernel versions, some with fewer types (Pad-13 has no bfloat16,
    # Pad-18 has): for each, the entries that differ from the table above.
    by_opset = {}
    for older in range(MIN_OPSET, opset):
        other = measure(older)
        diff = {op: other.get(op, []) for op in sorted(set(table) | set(other)) if other.get(op) != table.get(op)}
        if diff:
            by_opset[str(older)] = diff
    keys = set(table).union(*by_opset.values()) if by_opset else set(table)
    # only ops with other inputs (pads, indices, axes) list their T positions: the pass casts every
    # input of the rest, whatever their count (Einsum and Concat take any number)
    typed = {key: sorted(spec[0]) for key, spec in STRUCTURED.items() if key in keys and spec[1]}
    doc = {"onnxruntime": ort.__version__, "opset": opset, "missing": table, "by_opset": by_opset,
           "typed_inputs": typed}
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    print(json.dumps(doc, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()

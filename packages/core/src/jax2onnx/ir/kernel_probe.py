"""Probe which (op, dtype) pairs the installed onnxruntime's CPU provider implements.

    python -m jax2onnx.ir.kernel_probe     # writes ir/ort_kernels/<onnxruntime major.minor>.json
    python -m jax2onnx.ir.kernel_probe --contrib   # re-measures only its onnxruntime contrib ops

:mod:`jax2onnx.ir.runtime` reads the table measured for the installed onnxruntime version, and runs
:func:`measure_table` (then caches its result) for a version the package ships no table for.

For each op whose tensor inputs and output share one type parameter (elementwise, binary,
variadic, MatMul, Where's value inputs, ...) and each dtype JAX has, a one-node model is created
and given to an InferenceSession; "missing" means onnxruntime answered that it has no kernel
(NOT_IMPLEMENTED) — that is what ``jax2onnx.passes.KernelCoveragePass`` routes around with casts.
Probed at opset 21 (the kernels ``to_onnx``'s default opset gets; an op newer than that, like
Attention, at its own opset) and, as differences from that table, at each older opset down to
jax2onnx.ir.opsets.MIN_OPSET where the form exists (older op versions have older kernels).
Beside what is missing, :func:`measure_inexact` records kernels that load but compute something
else than the spec on a dtype (float16 Sign of NaN, float64 Attention's float32 accuracy), and
:func:`measure_contrib` the dtypes of the onnxruntime contrib ops lowerings emit (:data:`CONTRIB`).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

#: the oldest opset probed: jax2onnx.ir.opsets.MIN_OPSET (not imported: opsets reaches the passes,
#: which read the tables; tests/test_runtime.py checks the two agree)
MIN_OPSET = 13

#: the folder of the measured tables, one per onnxruntime ``major.minor``
TABLES = os.path.join(os.path.dirname(__file__), "ort_kernels")

DTYPES = {
    "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16, "float32": TensorProto.FLOAT,
    "float64": TensorProto.DOUBLE, "int8": TensorProto.INT8, "int16": TensorProto.INT16, "int32": TensorProto.INT32,
    "int64": TensorProto.INT64, "uint8": TensorProto.UINT8, "uint16": TensorProto.UINT16, "uint32": TensorProto.UINT32,
    "uint64": TensorProto.UINT64, "bool": TensorProto.BOOL,
}
UNARY = ["Abs", "Neg", "Sqrt", "Exp", "Log", "Tanh", "Sigmoid", "Relu", "Floor", "Ceil", "Round", "Sign",
         "Erf", "Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Reciprocal", "Identity", "Not",
         "BitwiseNot", "Softplus", "IsNaN", "IsInf", "Elu", "Celu", "Selu", "LeakyRelu", "HardSigmoid",
         "HardSwish", "Mish", "Softsign", "LogSoftmax"]
BINARY = ["Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Mod", "MatMul", "Equal", "Less", "Greater",
          "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift"]
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
    "ReduceMean": ({0: [2, 2]}, {1: [1]}, {}, True),
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
    "InstanceNormalization": ({0: [1, 2, 2], 1: [2], 2: [2]}, {}, {}, True),
    # opset 23: probed at its own opset (see :func:`_probe_opset`)
    "Attention": ({0: [1, 1, 2, 2], 1: [1, 1, 2, 2], 2: [1, 1, 2, 2]}, {}, {}, True),
    **{f"ScatterND{'' if r == 'none' else ':' + r}": ({0: [2, 2], 2: [1, 2]}, {1: [[0]]}, {"reduction": r}, True)
       for r in ("none", "add", "mul", "max", "min")},
    **{f"ScatterElements{'' if r == 'none' else ':' + r}": (
        {0: [2, 2], 2: [1, 2]}, {1: [[0, 1]]}, {"reduction": r, "axis": 0}, True)
       for r in ("none", "add", "mul", "max", "min")},
}

#: the opset each scatter reduction appeared at (ONNX's spec: ScatterND/ScatterElements -16 took
#: add/mul, -18 max/min). Before it the form does not exist: legalization rebuilds it, and its
#: kernel question is the form's own, at its first opset (``LoweringContext.kernel_dtypes``).
REDUCTION_SINCE = {"add": 16, "mul": 16, "max": 18, "min": 18}


def _probe_opset(key: str, opset: int, newer: bool) -> int | None:
    """The opset to probe ``key`` (``op`` or ``op:reduction``) at for the table of ``opset``: that
    opset where the form exists there; for an op newer than the table's opset (Attention, 23), its
    first opset when ``newer`` (the main table, which newer opsets share), else None (not probed:
    the older tables list what differs where the form exists)."""
    op, _, reduction = key.partition(":")
    since = max(_first_opset(op) or 0, REDUCTION_SINCE.get(reduction, 0))
    if since <= opset:
        return opset
    return since if newer and not reduction else None


def _first_opset(op: str) -> int | None:
    for version in range(1, onnx.defs.onnx_opset_version() + 1):
        try:
            onnx.defs.get_schema(op, version, "")
        except onnx.defs.SchemaError:
            continue
        return version
    return None


def _model(graph: onnx.GraphProto, opset: int) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    # IR 10 up to opset 21 (loads in every onnxruntime this probe runs on), the IR an opset needs above
    model.ir_version = max(10, helper.find_min_ir_version_for([helper.make_opsetid("", opset)], ignore_unknown=True))
    return model


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
    import onnxruntime as ort

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
    attrs: dict[str, Any] = {"fmod": 1} if op == "Mod" and elem in (TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16) else {}
    if op == "BitShift":
        attrs = {"direction": "LEFT"}
    if op == "Where":
        inputs = [helper.make_tensor_value_info("c", TensorProto.BOOL, [2, 2])] + [
            helper.make_tensor_value_info(f"x{i}", elem, [2, 2]) for i in range(2)]
    node = helper.make_node(op, [i.name for i in inputs], ["y"], **attrs)
    graph = helper.make_graph([node], "probe", inputs, [helper.make_tensor_value_info("y", out_t, [2, 2])])
    return _session(_model(graph, opset))


def probe_structured(key: str, dtype: str, opset: int) -> bool | None:
    """An op of STRUCTURED, built and run once on zeros (some kernels refuse a type only when they
    run). numpy has no bfloat16 onnxruntime takes: a bfloat16 probe is fed float32 and casts in the
    graph (Cast has every float pair), its T output cast back to float32."""
    op = key.split(":")[0]
    typed, others, attrs, same_out = STRUCTURED[key]
    if op in ("ReduceMax", "ReduceMin", "ReduceProd", "ReduceMean") and opset < 18:  # axes were an attribute then
        others, attrs = {}, {**attrs, "axes": others[1]}
    elem = DTYPES[dtype]
    fed = TensorProto.FLOAT if dtype == "bfloat16" else elem
    fed_np = "float32" if dtype == "bfloat16" else _NP[dtype]
    n = max([*typed, *others]) + 1
    nodes, names, inputs, inits, feeds = [], [], [], [], {}
    for i in range(n):
        if i in typed:
            name = f"x{i}"
            inputs.append(helper.make_tensor_value_info(name, fed, typed[i]))
            feeds[name] = np.ones(typed[i], dtype=fed_np) if op == "Range" and i == 2 else np.zeros(typed[i], dtype=fed_np)
            if fed != elem:
                nodes.append(helper.make_node("Cast", [name], [f"{name}_t"], to=elem))
                name = f"{name}_t"
        else:
            name = f"c{i}"
            value = np.asarray(others[i], dtype=np.int64)
            inits.append(helper.make_tensor(name, TensorProto.INT64, value.shape, value.ravel().tolist()))
        names.append(name)
    out_elem = elem if same_out else TensorProto.INT64
    y = "y_t" if same_out and fed != elem else "y"
    nodes.append(helper.make_node(op, names, [y, "i"] if op == "TopK" else [y], **attrs))
    if y != "y":
        nodes.append(helper.make_node("Cast", [y], ["y"], to=fed))
        out_elem = fed
    outs = [helper.make_tensor_value_info("y", out_elem, None)]
    if op == "TopK":
        outs.append(helper.make_tensor_value_info("i", TensorProto.INT64, None))
    graph = helper.make_graph(nodes, "probe", inputs, outs, initializer=inits)
    return _session(_model(graph, opset), feeds)


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


def measure(opset: int, main: bool = True) -> dict[str, list[str]]:
    """(op or ``op:reduction``) -> the dtype names with no kernel at ``opset``, for every op that
    exists at ``opset`` (``main``: also the ops newer than it, at their own opset; see
    :func:`_probe_opset`). An op of STRUCTURED that is not probed has no key; one probed with
    every kernel present maps to []."""
    table: dict[str, list[str]] = {}
    for op, n in [*((o, 1) for o in UNARY), *((o, 2) for o in BINARY), ("Where", 3), ("Sum", 3), ("Mean", 3)]:
        f32, u8 = probe(op, n, TensorProto.FLOAT, opset), probe(op, n, TensorProto.UINT8, opset)
        missing = [name for name, elem in DTYPES.items() if _missing(op, probe(op, n, elem, opset), name, f32, u8)]
        if missing:
            table[op] = missing
    for key in STRUCTURED:
        at = _probe_opset(key, opset, main)
        if at is None:
            continue
        f32, u8 = probe_structured(key, "float32", at), probe_structured(key, "uint8", at)
        table[key] = [name for name in DTYPES
                      if _missing(key.split(":")[0], probe_structured(key, name, at), name, f32, u8)]
    return table


def _one_node(op: str, inputs: dict[str, np.dtype], attrs: dict, consts: list, n_out: int = 1, opset: int = 21) -> Any:
    """A session of one ``op`` node on ``inputs`` (name -> dtype; its outputs share the first
    input's type, a second one is int64) and int64 constant inputs; None when it does not load."""
    import onnxruntime as ort

    elem = helper.np_dtype_to_tensor_dtype(next(iter(inputs.values())))
    inits = [helper.make_tensor(f"c{i}", TensorProto.INT64, [len(c)], c) for i, c in enumerate(consts)]
    outs = [helper.make_tensor_value_info("y", elem, None)]
    if n_out == 2:
        outs.append(helper.make_tensor_value_info("i", TensorProto.INT64, None))
    node = helper.make_node(op, [*inputs, *(i.name for i in inits)], [o.name for o in outs], **attrs)
    graph = helper.make_graph([node], "probe", [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(d), None)
                                                for n, d in inputs.items()], outs, initializer=inits)
    model = _model(graph, opset)
    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except Exception:  # noqa: BLE001 - no kernel: the load probes above record that
        return None


def _run_one(op: str, x: np.ndarray, attrs: dict, consts: list, n_out: int = 1) -> np.ndarray | None:
    """``op`` on ``x`` (and int64 constant inputs) in onnxruntime, its first output; None when it
    does not load or run."""
    sess = _one_node(op, {"x": x.dtype}, attrs, consts, n_out)
    try:
        return None if sess is None else sess.run(None, {"x": x})[0]
    except Exception:  # noqa: BLE001
        return None


def _reduce_rows(dtype: np.dtype) -> np.ndarray:
    """Rows a reduction gets wrong when its kernel is wrong: the dtype's extremes, and for int64 the
    uint32 values a carrier brings (onnxruntime 1.31's int64 ReduceMin returns 3 for [3, 1, 2**40, 2**32-1])."""
    if dtype.kind == "f":
        return np.array([[3.0, 1.0, -2.5, 7.0], [np.inf, -np.inf, 0.5, 2.0]], dtype)
    info = np.iinfo(dtype)
    rows = [[3, 1, info.max, info.min], [info.max, info.max - 1, 0, 1]]
    if dtype == np.int64:
        rows += [[3, 1, 2**40, 2**32 - 1], [0, 1, 2**31, 2**32 - 1], [-3, -1, -(2**40), 1 - 2**32]]
    return np.array(rows, dtype)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _erf(x: np.ndarray) -> np.ndarray:
    import math

    return np.vectorize(math.erf)(x)


#: activation op -> (attributes, the float64 reference, the attribute sets to check): the values
#: a float kernel must give. onnxruntime builds some from float32 functions (Gelu's constants),
#: so their float64 results are float32-accurate: inexact for float64.
_ACTIVATIONS: dict[str, list[tuple[dict, Any]]] = {
    "Gelu": [({}, lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2.0)))),
             ({"approximate": "tanh"}, lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3))))],
    "Softplus": [({}, lambda x: np.logaddexp(x, 0.0))],
    "Elu": [({"alpha": 1.0}, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0))))],
    "Celu": [({"alpha": 1.0}, lambda x: np.maximum(x, 0) + np.minimum(0, np.expm1(np.minimum(x, 0))))],
    "Selu": [({"alpha": _SELU_ALPHA, "gamma": _SELU_SCALE},
              lambda x: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * np.expm1(np.minimum(x, 0))))],
    "LeakyRelu": [({"alpha": 0.01}, lambda x: np.where(x >= 0, x, 0.01 * x))],
    "HardSigmoid": [({"alpha": 1 / 6, "beta": 0.5}, lambda x: np.clip(x / 6 + 0.5, 0, 1))],
    "HardSwish": [({}, lambda x: x * np.clip(x / 6 + 0.5, 0, 1))],
    "Mish": [({}, lambda x: x * np.tanh(np.logaddexp(x, 0.0)))],
}


def _activation_inexact(op: str) -> list[str]:
    """The float dtypes ``op`` (every attribute set of :data:`_ACTIVATIONS`) misses its reference
    on: relative error above a few units in the last place."""
    x64 = np.linspace(-4.0, 4.0, 41) + 1e-3
    wrong = []
    for dtype, rtol in ((np.dtype(np.float32), 1e-5), (np.dtype(np.float64), 1e-12)):
        for attrs, ref in _ACTIVATIONS[op]:
            x = x64.astype(dtype)
            got = _run_one(op, x, attrs, [])
            if got is not None and not np.allclose(got, ref(x.astype(np.float64)), rtol=rtol, atol=rtol):
                wrong.append(dtype.name)
                break
    return wrong


def _matmul_vector_fails(dtype: np.dtype) -> bool:
    """Whether ``MatMul`` of an empty batch of rows by a vector fails (onnxruntime 1.31: "left
    operand cannot broadcast on dim 0" for (0, 4) @ (4,)), while (3, 4) @ (4,) runs."""
    sess = _one_node("MatMul", {"a": dtype, "b": dtype}, {}, [])
    try:
        if sess is None:
            return False  # no kernel at all: the load probes record that
        sess.run(None, {"a": np.ones((3, 4), dtype), "b": np.ones((4,), dtype)})
    except Exception:  # noqa: BLE001
        return False
    try:
        return sess.run(None, {"a": np.ones((0, 4), dtype), "b": np.ones((4,), dtype)})[0].shape != (0,)
    except Exception:  # noqa: BLE001
        return True


def _sign_inexact(dtypes: list[np.dtype]) -> list[str]:
    """The dtypes whose Sign differs from numpy's on NaN, infinities and signed zeros (onnxruntime's
    float16 Sign gives 0 for NaN)."""
    wrong = []
    for dtype in dtypes:
        if dtype.kind == "f":
            x = np.array([np.nan, -np.inf, -2.5, -0.0, 0.0, 1.5, np.inf], dtype)
        else:
            info = np.iinfo(dtype)
            x = np.array([info.min, 0, 1, info.max], dtype)
        got = _run_one("Sign", x, {}, [])
        if got is not None and not np.array_equal(got, np.sign(x), equal_nan=True):
            wrong.append(dtype.name)
    return wrong


def _clip_inexact(dtypes: list[np.dtype]) -> list[str]:
    """The dtypes whose Clip (scalar bounds) differs from numpy's clip: values past both bounds,
    the dtype's extremes, and for floats NaN (kept) and infinities."""
    wrong = []
    for dtype in dtypes:
        if dtype.kind == "f":
            x = np.array([np.nan, -np.inf, -5.0, -1.0, 0.5, 3.0, 7.0, np.inf], dtype)
        else:
            info = np.iinfo(dtype)
            x = np.array([info.min, 0, 1, 2, 5, info.max], dtype)
        lo, hi = np.asarray(0 if dtype.kind == "u" else -1, dtype), np.asarray(3, dtype)
        sess = _one_node("Clip", {"x": dtype, "lo": dtype, "hi": dtype}, {}, [])
        try:
            got = None if sess is None else sess.run(None, {"x": x, "lo": lo, "hi": hi})[0]
        except Exception:  # noqa: BLE001 - no kernel: the load probes record that
            got = None
        if got is not None and not np.array_equal(got, np.clip(x, lo, hi), equal_nan=True):
            wrong.append(dtype.name)
    return wrong


def _softmax(s: np.ndarray) -> np.ndarray:
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _fused_inexact(op: str) -> list[str]:
    """The float dtypes a fused op (Attention, InstanceNormalization) misses a float64 reference on
    by more than a few units in the last place (onnxruntime's float64 Attention is float32-accurate,
    3e-8 off): a lowering that wants JAX's float64 result exactly keeps the decomposition there."""
    rng = np.random.default_rng(0)
    wrong = []
    for dtype, rtol in ((np.dtype(np.float32), 1e-5), (np.dtype(np.float64), 1e-12)):
        if op == "Attention":  # (batch, heads, seq, depth), the default scale 1/sqrt(depth)
            q, k, v = (rng.standard_normal(s) for s in ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4)))
            ref = _softmax(q @ np.swapaxes(k, -1, -2) / 2.0) @ v
            feeds, attrs = {"q": q, "k": k, "v": v}, {}
        else:  # InstanceNormalization over the spatial axis, per channel
            x, scale, bias = rng.standard_normal((2, 3, 5)), rng.standard_normal(3), rng.standard_normal(3)
            ref = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * scale[:, None] + bias[:, None]
            feeds, attrs = {"x": x, "scale": scale, "bias": bias}, {"epsilon": 1e-5}
        feeds = {name: value.astype(dtype) for name, value in feeds.items()}
        sess = _one_node(op, {name: dtype for name in feeds}, attrs, [], opset=_first_opset(op) if op == "Attention" else 21)
        try:
            got = None if sess is None else sess.run(None, feeds)[0]
        except Exception:  # noqa: BLE001 - no kernel: the load probes record that
            got = None
        if got is not None and not np.allclose(got, ref, rtol=rtol, atol=rtol):
            wrong.append(dtype.name)
    return wrong


def measure_inexact() -> dict[str, list[str]]:
    """Kernels that load but compute something else than the ONNX spec (and XLA) on values at a
    dtype's edges; a lowering that meets one takes another form or an exact carrier.

    - ReduceMin/ReduceMax: compared with numpy on :func:`_reduce_rows`;
    - TopK: NaN is greater than every number (the spec; XLA's sort order): last ascending, first descending;
    - the activations of :data:`_ACTIVATIONS`, compared with float64 references;
    - ``MatMul:vector``: a matrix with no rows times a vector (:func:`_matmul_vector_fails`);
    - Sign and Clip on NaN, infinities and the dtype's extremes, compared with numpy;
    - Attention and InstanceNormalization, compared with float64 references (:func:`_fused_inexact`).
    """
    table: dict[str, list[str]] = {}
    ints = [np.dtype(t) for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64")]
    floats = [np.dtype(t) for t in ("float16", "float32", "float64")]
    for op, ref in (("ReduceMin", np.min), ("ReduceMax", np.max)):
        wrong = []
        for dtype in ints + floats:
            x = _reduce_rows(dtype)
            got = _run_one(op, x, {"keepdims": 0}, [[1]])
            if got is not None and not np.array_equal(got, ref(x, axis=1)):
                wrong.append(dtype.name)
        if wrong:
            table[op] = wrong
    wrong = []
    for dtype in floats:
        x = np.array([[1.0, np.nan, 3.0, -np.inf, 2.0], [np.nan, 1.0, 3.0, np.nan, 2.0], [1.0, 2.0, 3.0, 4.0, np.nan]], dtype)
        ascending = _run_one("TopK", x, {"largest": 0}, [[5]], n_out=2)
        descending = _run_one("TopK", x, {"largest": 1}, [[5]], n_out=2)
        if ascending is None or descending is None:
            continue
        if not (np.array_equal(ascending, np.sort(x, axis=1), equal_nan=True)
                and np.array_equal(descending, np.flip(np.sort(x, axis=1), axis=1), equal_nan=True)):
            wrong.append(dtype.name)
    if wrong:
        table["TopK"] = wrong
    wrong = [d.name for d in ints + floats if _matmul_vector_fails(d)]
    if wrong:
        table["MatMul:vector"] = wrong
    for op in _ACTIVATIONS:
        wrong = _activation_inexact(op)
        if wrong:
            table[op] = wrong
    for op, wrong in (("Sign", _sign_inexact(ints + floats)), ("Clip", _clip_inexact(ints + floats)),
                      ("Attention", _fused_inexact("Attention")),
                      ("InstanceNormalization", _fused_inexact("InstanceNormalization"))):
        if wrong:
            table[op] = wrong
    return table


#: onnxruntime's own ops (no ONNX schema to read their types from): "domain.Op" -> (an input it
#: computes a known answer for, the answer). Probed per float dtype; the table's ``contrib`` lists
#: the dtypes each runs and gets right (the lowerings that emit one ask ``ctx.kernel_dtypes``).
CONTRIB: dict[str, tuple[np.ndarray, np.ndarray]] = {
    # batched [*, M, M] inverse (Eigen's partial-pivoting LU): the packs' solve/inv/cholesky lowerings under target='onnxruntime'
    "com.microsoft.Inverse": (np.array([[[2.0, 1.0], [1.0, 1.0]], [[0.0, 2.0], [4.0, 0.0]]]),
                              np.array([[[1.0, -1.0], [-1.0, 2.0]], [[0.0, 0.25], [0.5, 0.0]]])),
}


def measure_contrib() -> dict[str, list[str]]:
    """``domain.Op`` of :data:`CONTRIB` -> the dtype names whose CPU kernel loads and computes the
    known answer (an op's ``since_version`` is 1 in its domain)."""
    import onnxruntime as ort

    table: dict[str, list[str]] = {}
    for key, (x, want) in CONTRIB.items():
        domain, _, op = key.rpartition(".")
        table[key] = []
        for name in ("float16", "float32", "float64"):
            elem = DTYPES[name]
            node = helper.make_node(op, ["x"], ["y"], domain=domain)
            graph = helper.make_graph([node], "probe", [helper.make_tensor_value_info("x", elem, None)],
                                      [helper.make_tensor_value_info("y", elem, None)])
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(domain, 1)])
            model.ir_version = 10
            opts = ort.SessionOptions()
            opts.log_severity_level = 4
            try:
                sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
                got = sess.run(None, {"x": x.astype(name)})[0]
            except Exception:  # noqa: BLE001 - no kernel of this type
                continue
            if np.allclose(got.astype(np.float64), want, rtol=1e-3, atol=1e-3):
                table[key].append(name)
    return table


def measure_table() -> dict[str, Any]:
    """The installed onnxruntime's table: what :class:`jax2onnx.ir.runtime.Runtime` reads."""
    import onnxruntime as ort

    opset = 21  # IR 10: loads in every onnxruntime this probe runs on; kernels are the same at 23
    probed = measure(opset)
    table = {op: names for op, names in probed.items() if names}
    # Older opsets pick older kernel versions, some with fewer types (Pad-13 has no bfloat16,
    # Pad-18 has): for each, the entries that differ from the table above, among the forms that
    # exist there (a scatter reduction before its opset is legalization's, read from the main table).
    by_opset = {}
    for older in range(MIN_OPSET, opset):
        other = measure(older, main=False)
        keys = {op for op in set(table) | set(other) if op not in STRUCTURED or op in other}
        diff = {op: other.get(op, []) for op in sorted(keys) if (other.get(op) or None) != table.get(op)}
        if diff:
            by_opset[str(older)] = diff
    keys = set(table).union(*by_opset.values()) if by_opset else set(table)
    # only ops with other inputs (pads, indices, axes) list their T positions: the pass casts every
    # input of the rest, whatever their count (Einsum and Concat take any number)
    typed = {key: sorted(spec[0]) for key, spec in STRUCTURED.items() if key in keys and spec[1]}
    return {"onnxruntime": ort.__version__, "opset": opset, "missing": table, "by_opset": by_opset,
            "typed_inputs": typed, "inexact": measure_inexact(), "contrib": measure_contrib()}


def write_table(doc: dict[str, Any], path: str) -> None:
    """Write ``doc`` to ``path`` atomically (a concurrent reader sees the old file or the new one)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def main() -> None:
    import sys

    import onnxruntime as ort

    path = os.path.join(TABLES, ".".join(ort.__version__.split(".")[:2]) + ".json")
    if "--contrib" in sys.argv[1:] and os.path.exists(path):  # the contrib entry only, the rest as measured before
        with open(path, encoding="utf-8") as f:
            doc = {**json.load(f), "contrib": measure_contrib()}
    else:
        doc = measure_table()
    write_table(doc, path)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()

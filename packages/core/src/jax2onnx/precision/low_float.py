"""float16 / bfloat16 export: weights stored and computed in the 16-bit type, float32 where it matters.

The pass plans a dtype for every float32 value of the main graph before it changes anything:

- each node *computes* in the low type or in float32. float32 when the work is numerically
  sensitive (:data:`FLOAT32_OPS`: softmax, exp/log, sum-like reductions, normalizations without a
  ``stash_type``), when onnxruntime's CPU provider has no kernel for the op in the low type (the
  kernel table of :mod:`jax2onnx.passes.kernel_coverage`), when the op's schema does not allow the
  low type, when an output's type is set by an attribute (``ConstantOfShape``, ``RandomNormal``)
  or for a custom-domain node or a function call (their bodies keep float32). Normalizations with a
  ``stash_type`` (LayerNormalization, RMSNormalization, GroupNormalization) run in the low type with
  ``stash_type=1``: their statistics are float32 inside the op; ``Attention`` gets
  ``softmax_precision=1`` (float32 softmax);
- for bfloat16 the graph computes in float32 from bfloat16 weights (one Cast per weight), the
  *carrier* the report names: onnxruntime's CPU provider has almost no bfloat16 compute kernels
  (MatMul, Gemm, Add, Mul are missing), and a model must load where it is verified;
- a ``Cast`` to float32 takes whatever type its readers want (a second copy when readers differ),
  so the pass never puts a Cast in front of or behind an existing Cast;
- one Cast per (value, type) is inserted where a producer's type differs from what a reader
  computes in: graph inputs (float32 unless ``keep_io_types=False``), outputs of float32 nodes,
  weights read by float32 work. Graph outputs are cast back to float32 under their own names;
- weights (initializers of 64 elements or more) are stored in the low type always; smaller
  constants take the type of their readers (both copies when readers differ), so an epsilon
  added in float32 stays exact. A streamed weight (:class:`~jax2onnx.Weights`) is converted when it
  is written, one tensor at a time. A float16 weight beyond float16's range (65504) is an error
  naming it (a constant closed over by the function stays float32 instead).

Control-flow bodies (``If``/``Loop``/``Scan``) and function bodies (``@onnx_function``) compute in
float32: a control-flow node reads float32 (converted outer weights, a ``Scan``'s stacked layer
weights included, through one Cast each in the main graph), and the weights those bodies hold
themselves (``Constant`` nodes of :data:`WEIGHT_ELEMENTS` or more) are stored in the low type and
widened by one Cast inside the body. So the bytes shrink everywhere; onnxruntime folds those Casts
of constants once when the session starts.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import onnx_ir as ir

from ..ir.graphs import FreshNames, all_graphs
from ..passes.kernel_coverage import missing_kernels, table_key
from .options import PrecisionError

F32 = ir.DataType.FLOAT
LOW_TYPES = {"float16": ir.DataType.FLOAT16, "bfloat16": ir.DataType.BFLOAT16}
_NUMPY = {"float16": np.dtype(np.float16), "bfloat16": np.dtype(ml_dtypes.bfloat16)}

#: Numerically sensitive work kept in float32 (one Cast in, one out): exponentials and logarithms,
#: sums over many elements, normalizations whose op has no float32 ``stash_type``.
FLOAT32_OPS = frozenset({
    "Softmax", "LogSoftmax", "Exp", "Log", "ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceLogSum",
    "ReduceLogSumExp", "ReduceL1", "ReduceL2", "ReduceProd", "CumSum", "SoftmaxCrossEntropyLoss",
    "NegativeLogLikelihoodLoss", "InstanceNormalization", "MeanVarianceNormalization", "LpNormalization",
})
#: Ops whose ``stash_type`` attribute keeps their statistics in float32 while they read and write
#: the low type.
STASH_TYPE_OPS = frozenset({"LayerNormalization", "RMSNormalization", "GroupNormalization"})
#: A constant this large is a weight: stored in the low type whoever reads it (smaller ones,
#: epsilons and scalars, take their readers' type).
WEIGHT_ELEMENTS = 64
FLOAT16_MAX = 65504.0


@dataclasses.dataclass
class LowFloatResult:
    """What the pass did, for the report."""

    kind: str
    compute: str  # "float16", "bfloat16" or "float32" (the carrier)
    float32_ops: dict[str, str] = dataclasses.field(default_factory=dict)  # op -> why it computes in float32
    kept_float32: list[str] = dataclasses.field(default_factory=list)  # constants out of the low type's range
    body_weights: int = 0  # Constant weights of function and control-flow bodies stored in the low type

    def describe(self) -> str:
        if self.compute == "float32":
            why = ", ".join(sorted(op for op, r in self.float32_ops.items() if r == "kernel"))
            return (f"{self.kind} weights, computed in float32 (carrier): onnxruntime's CPU provider has no {self.kind} "
                    f"compute kernels{' (here: ' + why + ')' if why else ''}") + self._bodies()
        text = f"{self.kind} weights and compute"
        if self.float32_ops:
            text += "; float32 for " + ", ".join(sorted(self.float32_ops))
        if self.kept_float32:
            text += f"; {len(self.kept_float32)} constant(s) beyond {self.kind}'s range kept float32"
        return text + self._bodies()

    def _bodies(self) -> str:
        return (f"; {self.body_weights} weight(s) of function/control-flow bodies stored {self.kind}, "
                "computed in float32" if self.body_weights else "")


@functools.cache
def _schema(op: str, opset: int) -> Any:
    try:
        return onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        return None


def _formal(params: Any, i: int) -> Any:
    if i < len(params):
        return params[i]
    if params and params[-1].option == onnx.defs.OpSchema.FormalParameterOption.Variadic:
        return params[-1]
    return None


def _is_f32(v: ir.Value | None) -> bool:
    return v is not None and v.type is not None and v.dtype == F32


def _used(v: ir.Value, outputs: set[int]) -> bool:
    return id(v) in outputs or bool(list(v.uses()))


@dataclasses.dataclass
class _Plan:
    mode: str  # "low" | "f32" | "cast"
    inputs: frozenset[int] = frozenset()  # input slots that read the low type
    outputs: frozenset[int] = frozenset()  # output slots written in the low type
    why: str | None = None  # why a node computes in float32


def _plan_node(node: ir.Node, kind: str, opset: int, missing: dict[str, frozenset[np.dtype]],
               outputs: set[int]) -> _Plan | None:
    """None: the node neither reads nor writes float32."""
    ins = [i for i, v in enumerate(node.inputs) if _is_f32(v)]
    outs = [j for j, v in enumerate(node.outputs) if _is_f32(v) and _used(v, outputs)]
    if node.domain in ("", "ai.onnx") and node.op_type == "Cast":
        return _Plan("cast") if outs else None
    if not ins and not outs:
        return None
    if node.domain not in ("", "ai.onnx"):
        return _Plan("f32", why="custom")
    if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in node.attributes.values()):
        return _Plan("f32", why="control flow")  # its body computes in float32 (see the module's doc)
    if node.op_type in FLOAT32_OPS:
        return _Plan("f32", why="sensitive")
    if _NUMPY[kind] in missing.get(table_key(node), frozenset()):
        return _Plan("f32", why="kernel")
    schema = _schema(node.op_type, opset)
    if schema is None:
        return _Plan("f32", why="schema")
    params: dict[str, set[str]] = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    bound_in: set[str] = set()
    in_slots, out_slots = set(), set()
    for i in ins:
        f = _formal(schema.inputs, i)
        if f is not None and f.type_str in params:
            bound_in.add(f.type_str)
            in_slots.add(i)
    for j in outs:
        f = _formal(schema.outputs, j)
        if f is None or f.type_str not in params:
            continue  # a fixed tensor(float) output stays float32
        if f.type_str not in bound_in:
            return _Plan("f32", why="attribute")  # the output type comes from an attribute
        out_slots.add(j)
    low_str = f"tensor({kind})"
    if any(low_str not in params[p] for p in bound_in):
        return _Plan("f32", why="schema")
    if not in_slots:
        return _Plan("f32", why="schema")
    return _Plan("low", frozenset(in_slots), frozenset(out_slots))


def _convert_tensor(tensor: ir.TensorProtocol, kind: str, name: str) -> ir.TensorProtocol:
    """``tensor`` in the low type; a lazy weight stays lazy (converted when it is written)."""
    target = _NUMPY[kind]

    def convert(arr: np.ndarray) -> np.ndarray:
        arr = np.asarray(arr, dtype=np.float32)
        if kind == "float16" and not _fits(ir.Tensor(arr), kind):
            raise PrecisionError(f"weight {name!r} holds values beyond float16's range (max |x| = "
                                 f"{float(np.max(np.abs(arr[np.isfinite(arr)]))):.3g} > 65504); use precision='bfloat16'")
        return arr.astype(target)

    if isinstance(tensor, ir.LazyTensor):
        return ir.LazyTensor(lambda: ir.Tensor(convert(tensor.numpy()), name=name), dtype=LOW_TYPES[kind],
                             shape=tensor.shape, name=name)
    return ir.Tensor(convert(tensor.numpy()), name=name)


def _fits(tensor: ir.TensorProtocol, kind: str) -> bool:
    if kind != "float16" or isinstance(tensor, ir.LazyTensor):
        return True
    arr = np.abs(tensor.numpy())
    finite = arr[np.isfinite(arr)]  # inf and NaN exist in float16 too
    return not finite.size or float(finite.max()) <= FLOAT16_MAX


def _cast_node(value: ir.Value, dtype: ir.DataType, name: str) -> ir.Node:
    out = ir.Value(name=name, type=ir.TensorType(dtype), shape=value.shape)
    return ir.Node("", "Cast", [value], [ir.AttrInt64("to", int(dtype))], outputs=[out], name=f"{name}_cast")


def convert_low_float(model: ir.Model, kind: str, keep_io_types: bool = True) -> LowFloatResult:
    """Rewrite ``model``'s float32 work into ``kind`` (``"float16"``/``"bfloat16"``) in place."""
    low = LOW_TYPES[kind]
    graph = model.graph
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 23))
    missing = missing_kernels(opset)
    output_ids = {id(v) for v in graph.outputs}
    result = LowFloatResult(kind, kind)

    # A constant beyond float16's range is read by float32 work: a float16 reader would see inf.
    out_of_range = {id(v) for v in graph.initializers.values()
                    if _is_f32(v) and v.const_value is not None and not _fits(v.const_value, kind)}
    plans: dict[int, _Plan] = {}
    for node in graph:
        plan = _plan_node(node, kind, opset, missing, output_ids)
        if plan is None:
            continue
        if plan.mode == "low" and any(id(v) in out_of_range for v in node.inputs if v is not None):
            plan = _Plan("f32", why="range")
        plans[id(node)] = plan
        if plan.why in ("sensitive", "kernel"):
            result.float32_ops.setdefault(node.op_type, plan.why)
    if kind == "bfloat16":
        # onnxruntime's CPU provider implements bfloat16 for data movement and a few ops only (no
        # MatMul, Gemm, Add, Mul; the kernel table lists what it measured, and ops it did not probe,
        # such as Gemm, lack it too), and one bfloat16 island between float32 ops costs two Casts
        # and gains nothing: the graph computes in float32 from bfloat16 weights.
        result.compute = "float32"
        for key, plan in plans.items():
            if plan.mode == "low":
                plans[key] = _Plan("f32", why="carrier")

    def wanted(node: ir.Node, i: int, original: ir.DataType) -> ir.DataType | None:
        """The type ``node`` reads at input ``i`` (None: any, a Cast)."""
        plan = plans.get(id(node)) if node.graph is graph else None
        if plan is None:
            return original
        if plan.mode == "cast":
            return None
        return low if plan.mode == "low" and i in plan.inputs else original

    io_type = F32 if keep_io_types else low
    name = FreshNames(model)

    # 1. What each float32 value's readers want, read before anything changes.
    def readers(v: ir.Value) -> dict[ir.DataType, list[tuple[ir.Node | None, int]]]:
        by: dict[ir.DataType, list[tuple[ir.Node | None, int]]] = {}
        for user, i in v.uses():
            w = wanted(user, i, F32)
            if w is not None:
                by.setdefault(w, []).append((user, i))
        for k, o in enumerate(graph.outputs):
            if o is v:
                by.setdefault(io_type, []).append((None, k))
        return by

    # 2. New types of node outputs.
    produced: dict[int, ir.DataType] = {}
    for node in graph:
        plan = plans.get(id(node))
        if plan is not None and plan.mode == "low":
            for j in plan.outputs:
                produced[id(node.outputs[j])] = low

    pending: list[tuple[ir.Value, ir.DataType, list[tuple[ir.Node | None, int]], ir.Node | None]] = []

    # Sources: graph inputs, initializers, Constant nodes.
    for v in list(graph.inputs):
        if _is_f32(v):
            by = readers(v)
            v.type = ir.TensorType(io_type)
            for dtype, uses in by.items():
                if dtype != io_type:
                    pending.append((v, dtype, uses, None))
    for init_name, v in list(graph.initializers.items()):
        if not _is_f32(v) or v.const_value is None:
            continue
        by = readers(v)
        if not by:
            continue
        tensor = v.const_value
        big = int(np.prod([int(d) for d in tensor.shape])) >= WEIGHT_ELEMENTS
        if not _fits(tensor, kind):
            result.kept_float32.append(init_name)
            for dtype, uses in by.items():
                if dtype != F32:
                    pending.append((v, dtype, uses, None))
            continue
        if big or set(by) == {low}:
            v.const_value = _convert_tensor(tensor, kind, init_name)
            v.type = ir.TensorType(low)
            for dtype, uses in by.items():
                if dtype != low:
                    pending.append((v, dtype, uses, None))
        elif low in by:  # a small constant read both ways: a low copy beside the float32 one
            copy_name = name(f"{init_name}_{kind}")
            copy = ir.Value(name=copy_name, type=ir.TensorType(low), shape=v.shape,
                            const_value=_convert_tensor(tensor, kind, copy_name))
            graph.register_initializer(copy)
            for user, i in by[low]:
                user.replace_input_with(i, copy)

    for node in list(graph):
        plan = plans.get(id(node))
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and _is_f32(node.outputs[0]):
            v = node.outputs[0]
            by = readers(v)
            attr = node.attributes.get("value")
            if attr is None or not by:
                continue
            tensor = attr.value
            big = int(np.prod([int(d) for d in tensor.shape])) >= WEIGHT_ELEMENTS
            if not _fits(tensor, kind) or not (big or set(by) == {low}):
                if low in by:
                    copy = ir.Value(name=name(f"{v.name}_{kind}"), type=ir.TensorType(low), shape=v.shape)
                    const = ir.Node("", "Constant", [], [ir.AttrTensor("value", _convert_tensor(tensor, kind, copy.name))],
                                    outputs=[copy], name=f"{copy.name}_node")
                    graph.insert_after(node, const)
                    for user, i in by[low]:
                        user.replace_input_with(i, copy)
                continue
            node.attributes["value"] = ir.AttrTensor("value", _convert_tensor(tensor, kind, v.name))
            v.type = ir.TensorType(low)
            for dtype, uses in by.items():
                if dtype != low:
                    pending.append((v, dtype, uses, node))
            continue
        if plan is None:
            continue
        if plan.mode == "cast":
            out = node.outputs[0]
            by = readers(out)
            if set(by) == {low}:
                node.attributes["to"] = ir.AttrInt64("to", int(low))
                out.type = ir.TensorType(low)
            elif low in by:  # readers of both types: a second Cast of the same input, never Cast -> Cast
                twin = _cast_node(node.inputs[0], low, name(f"{out.name}_{kind}"))
                graph.insert_after(node, twin)
                for user, i in by[low]:
                    if user is None:
                        continue
                    user.replace_input_with(i, twin.outputs[0])
            continue
        if plan.mode == "low":
            if node.op_type in STASH_TYPE_OPS:
                node.attributes["stash_type"] = ir.AttrInt64("stash_type", 1)
            if node.op_type == "Attention":
                node.attributes["softmax_precision"] = ir.AttrInt64("softmax_precision", int(F32))
        for out in node.outputs:
            if not _is_f32(out) or not _used(out, output_ids):
                continue
            by = readers(out)
            new = produced.get(id(out), F32)
            out.type = ir.TensorType(new)
            for dtype, uses in by.items():
                if dtype != new:
                    pending.append((out, dtype, uses, node))

    result.body_weights = _convert_body_constants(model, kind, name)

    # 3. One Cast per (value, type), right after its producer (sources: at the top of the graph).
    for value, dtype, uses, producer in pending:
        graph_uses = [(u, i) for u, i in uses if u is not None]
        out_slots = [i for u, i in uses if u is None]
        cast = _cast_node(value, dtype, name(f"{value.name}_{ir.DataType(dtype).name.lower()}"))
        if producer is not None:
            graph.insert_after(producer, cast)
        elif len(graph):
            graph.insert_before(next(iter(graph)), cast)
        else:
            graph.append(cast)
        for user, i in graph_uses:
            user.replace_input_with(i, cast.outputs[0])
        for k in out_slots:  # a graph output keeps its name; the value before the Cast is renamed
            out_name = value.name
            value.name = name(f"{out_name}_{kind}")
            cast.outputs[0].name = out_name
            graph.outputs[k] = cast.outputs[0]
    return result


def _convert_body_constants(model: ir.Model, kind: str, name: FreshNames) -> int:
    """The weights function and control-flow bodies hold (``Constant`` nodes of
    :data:`WEIGHT_ELEMENTS` float32 elements or more, within the low type's range): stored in the
    low type, widened by one Cast in the body. Returns how many."""
    low = LOW_TYPES[kind]
    done = 0
    for g in all_graphs(model):
        if g is model.graph:
            continue
        for node in list(g):
            if node.op_type != "Constant" or node.domain not in ("", "ai.onnx") or not _is_f32(node.outputs[0]):
                continue
            attr = node.attributes.get("value")
            if attr is None or attr.type != ir.AttributeType.TENSOR:
                continue
            tensor = attr.value
            if int(np.prod([int(d) for d in tensor.shape])) < WEIGHT_ELEMENTS or not _fits(tensor, kind):
                continue
            old = node.outputs[0]
            stored = ir.Value(name=name(f"{old.name}_{kind}"), type=ir.TensorType(low), shape=old.shape)
            const = ir.Node("", "Constant", [], [ir.AttrTensor("value", _convert_tensor(tensor, kind, stored.name))],
                            outputs=[stored], name=f"{stored.name}_node")
            cast = _cast_node(stored, F32, name(f"{old.name}_float32"))
            ir.convenience.replace_nodes_and_values(g, node, [node], [const, cast], [old], [cast.outputs[0]])
            done += 1
    return done


__all__ = ["FLOAT32_OPS", "LOW_TYPES", "LowFloatResult", "STASH_TYPE_OPS", "convert_low_float"]

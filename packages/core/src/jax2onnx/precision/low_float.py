"""float16 / bfloat16 export: weights stored and computed in the 16-bit type, float32 where it matters.

The pass plans a dtype for every float32 value of the main graph before it changes anything:

- each node *computes* in the low type or in float32. float32 when the work is numerically
  sensitive (:data:`FLOAT32_OPS`: softmax, exp/log, sum-like reductions, normalizations without a
  ``stash_type``), when onnxruntime's CPU provider has no kernel for the op in the low type (the
  kernel table of :mod:`jax2onnx.passes.kernel_coverage`), when the op's schema does not allow the
  low type, when an output's type is set by an attribute (``ConstantOfShape``, ``RandomNormal``)
  or for a custom-domain node (but the float16 forms of the quantized ops the precision forms write:
  ``MatMulNBits`` reads float16 activations and scales, so a q4f16 model's matmuls need no Cast).
  Normalizations with a
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

Control-flow bodies (``If``/``Loop``/``Scan``) and function bodies (``@onnx_function``) are planned
by the same rules, and the values that cross into and out of them take one type on both sides:

- a ``Loop``/``Scan`` carried state, a scan output and an ``If`` output take the type the body
  computes it in (the producer of the body output; an ``If`` output is low when either branch
  computes it low); a scanned input and a state the body passes on unchanged take the type the
  body reads it in. The node's input is cast (once, outside the loop) and its output read in that
  type, so a body computing in float16 reads and writes float16 without a Cast per iteration;
- a carried state the body accumulates into (``Add``/``Sub``/``Sum`` of the state and something
  else: a running sum, a residual stream across stacked layers) stays float32, the rule that keeps
  sum reductions in float32: each iteration adds one more rounding, over as many iterations as
  the loop runs;
- a function's inputs take the type its body reads them in, its outputs the type its body writes
  them in; every call site reads and writes those (one body, so every call sees the same types);
- a body reads outer values (weights included) directly; a Cast a body reader needs is put next to
  the outer value's producer, so it runs once, not per iteration;
- bfloat16 bodies compute on the float32 carrier like the main graph: their weights are stored
  bfloat16 and widened by one Cast (in the body for a body's own ``Constant``; onnxruntime folds
  those once when the session starts).

Ops with graph attributes other than ``If``/``Loop``/``Scan`` (``SequenceMap``) compute in float32
and their bodies are left as traced.
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
from ..passes.pipeline import infer_shapes
from ..targets.precision_forms import float_slots
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
    float32_states: int = 0  # loop-carried states kept float32 (accumulated into)

    def describe(self) -> str:
        if self.compute == "float32":
            why = ", ".join(sorted(op for op, r in self.float32_ops.items() if r == "kernel"))
            return (f"{self.kind} weights, computed in float32 (carrier): onnxruntime's CPU provider has no {self.kind} "
                    f"compute kernels{' (here: ' + why + ')' if why else ''}") + self._bodies()
        text = f"{self.kind} weights and compute"
        if self.float32_ops:
            text += "; float32 for " + ", ".join(f"{op} ({why})" for op, why in sorted(self.float32_ops.items()))
        if self.kept_float32:
            text += f"; {len(self.kept_float32)} constant(s) beyond {self.kind}'s range kept float32"
        if self.float32_states:
            text += f"; {self.float32_states} loop-carried sum(s) kept float32"
        return text + self._bodies()

    def _bodies(self) -> str:
        return f"; {self.body_weights} weight(s) of function/control-flow bodies stored {self.kind}" if self.body_weights else ""


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
    mode: str  # "low" | "f32" | "cast" | "linked" (control flow, function call: types per slot)
    inputs: frozenset[int] = frozenset()  # input slots that read the low type
    outputs: frozenset[int] = frozenset()  # output slots written in the low type
    why: str | None = None  # why a node computes in float32
    in_types: dict[int, ir.DataType] = dataclasses.field(default_factory=dict)  # linked: float32 input slots
    out_types: dict[int, ir.DataType] = dataclasses.field(default_factory=dict)  # linked: float32 output slots


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
        return _contrib_plan(node, kind, ins, outs, missing)
    if any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in node.attributes.values()):
        return _Plan("f32", why="control flow")  # not If/Loop/Scan: its body is left as traced
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


def _contrib_plan(node: ir.Node, kind: str, ins: list[int], outs: list[int],
                  missing: dict[str, frozenset[np.dtype]]) -> _Plan:
    """A custom-domain node computes in float32, unless it is one of the precision forms' ops that
    compute in their activations' type (a q4f16 model's MatMulNBits: float16 activations and
    scales, :func:`jax2onnx.targets.precision_forms.float_slots`) and every float32 slot it has is
    one of those."""
    slots = float_slots(node.domain, node.op_type, kind)
    if slots is None or not ins or not (set(ins) <= slots[0] and set(outs) <= slots[1]):
        return _Plan("f32", why="custom")
    if _NUMPY[kind] in missing.get(table_key(node), frozenset()):
        return _Plan("f32", why="kernel")
    return _Plan("low", frozenset(ins), frozenset(outs))


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



#: control-flow ops whose bodies are planned with the main graph (their I/O links are known)
CONTROL_FLOW_OPS = frozenset({"If", "Loop", "Scan"})
#: ops that accumulate: a carried state one of them writes from its own previous value stays float32
ACCUMULATING_OPS = frozenset({"Add", "Sub", "Sum"})

Owner = ir.Graph | ir.Function
#: a reader of a value: a node and its input slot, or (None, k, owner): output k of a graph/function
Use = tuple[ir.Node | None, int, Owner | None]


@dataclasses.dataclass
class _Group:
    """Values a control-flow node links: they share one type (a carried state: the node's input,
    the body's input and output, the node's output)."""

    node_in: int | None
    node_out: int | None
    body_ins: list[ir.Value]
    body_outs: list[tuple[ir.Graph, int]]


def _is_control_flow(node: ir.Node) -> bool:
    return node.domain in ("", "ai.onnx") and node.op_type in CONTROL_FLOW_OPS


def _bodies(node: ir.Node) -> list[ir.Graph]:
    return [a.value for a in node.attributes.values() if a.type == ir.AttributeType.GRAPH]


def _groups(node: ir.Node) -> list[_Group]:
    """The linked float32 slots of an If/Loop/Scan node."""
    groups: list[_Group] = []
    if node.op_type == "If":
        branches = [node.attributes[b].value for b in ("then_branch", "else_branch") if b in node.attributes]
        groups = [_Group(None, k, [], [(b, k) for b in branches]) for k in range(len(node.outputs))]
    elif node.op_type == "Loop":
        body = node.attributes["body"].value
        n = len(node.inputs) - 2
        groups = [_Group(2 + k, k, [body.inputs[2 + k]], [(body, 1 + k)]) for k in range(n)]
        groups += [_Group(None, n + j, [], [(body, 1 + n + j)]) for j in range(len(body.outputs) - 1 - n)]
    elif node.op_type == "Scan":
        body = node.attributes["body"].value
        n_scan = int(node.attributes["num_scan_inputs"].value)
        n = len(node.inputs) - n_scan
        groups = [_Group(k, k, [body.inputs[k]], [(body, k)]) for k in range(n)]
        groups += [_Group(n + j, None, [body.inputs[n + j]], []) for j in range(n_scan)]
        groups += [_Group(None, n + j, [], [(body, n + j)]) for j in range(len(body.outputs) - n)]

    def f32(g: _Group) -> bool:
        values = [node.inputs[g.node_in] if g.node_in is not None else None,
                  node.outputs[g.node_out] if g.node_out is not None else None,
                  *g.body_ins, *(b.outputs[k] for b, k in g.body_outs)]
        return any(_is_f32(v) for v in values)

    return [g for g in groups if f32(g)]


def _inner(owner: Owner) -> ir.Graph:
    return owner.graph if isinstance(owner, ir.Function) else owner


class _LowFloat:
    """One conversion: plan every graph reached from the main graph (bodies, functions), then
    retype values and insert the Casts."""

    def __init__(self, model: ir.Model, kind: str, keep_io_types: bool, runtime: Any):
        self.model, self.kind = model, kind
        self.low = LOW_TYPES[kind]
        self.opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 23))
        self.missing = missing_kernels(self.opset, runtime)
        self.io_type = F32 if keep_io_types else self.low
        self.result = LowFloatResult(kind, kind)
        self.names = FreshNames(model)
        self.plans: dict[int, _Plan] = {}
        self.fixed: dict[int, ir.DataType] = {}  # the type of a linked body input / function input
        self.out_want: dict[tuple[int, int], ir.DataType] = {}  # (id(owner), k): a body's/function's output k
        self.owners: list[Owner] = []  # every graph planned, in planning order
        self.functions = {(f.domain, f.name, f.overload): f for f in model.functions.values()}
        self.signatures: dict[int, tuple[dict[int, ir.DataType], dict[int, ir.DataType]] | None] = {}
        self.output_ids: set[int] = set()
        self.out_of_range: set[int] = set()

    # -- planning -------------------------------------------------------------------------------

    def plan(self) -> None:
        for g in all_graphs(self.model):
            self.output_ids.update(id(v) for v in g.outputs)
            if isinstance(g, ir.Graph):
                # A constant beyond float16's range is read by float32 work: a float16 reader would see inf.
                self.out_of_range.update(id(v) for v in g.initializers.values()
                                         if _is_f32(v) and v.const_value is not None and not _fits(v.const_value, self.kind))
            for node in g:
                if node.op_type == "Constant" and _is_f32(node.outputs[0]):
                    attr = node.attributes.get("value")
                    if attr is not None and attr.type == ir.AttributeType.TENSOR and not _fits(attr.value, self.kind):
                        self.out_of_range.add(id(node.outputs[0]))
        self._plan_owner(self.model.graph)
        for f in self.model.functions.values():
            self._signature(f)

    def _plan_owner(self, owner: Owner) -> None:
        self.owners.append(owner)
        for node in owner:
            if _is_control_flow(node):
                self._plan_control_flow(node)
                continue
            callee = self.functions.get((node.domain, node.op_type, getattr(node, "overload", "")))
            if callee is not None:
                sig = self._signature(callee)
                if sig is not None:
                    ins, outs = sig
                    self.plans[id(node)] = _Plan("linked", in_types={i: t for i, t in ins.items() if i < len(node.inputs)},
                                                 out_types={j: t for j, t in outs.items() if j < len(node.outputs)})
                    continue
            plan = _plan_node(node, self.kind, self.opset, self.missing, self.output_ids)
            if plan is None:
                continue
            if plan.mode == "low" and any(id(v) in self.out_of_range for v in node.inputs if v is not None):
                plan = _Plan("f32", why="range")
            if plan.mode == "low" and self.kind == "bfloat16":
                # onnxruntime's CPU provider implements bfloat16 for data movement and a few ops only
                # (no MatMul, Gemm, Add, Mul; the kernel table lists what it measured, and ops it did
                # not probe, such as Gemm, lack it too), and one bfloat16 island between float32 ops
                # costs two Casts and gains nothing: the graph computes in float32 from bfloat16 weights.
                plan = _Plan("f32", why="carrier")
            self.plans[id(node)] = plan
            if plan.why in ("sensitive", "kernel"):
                self.result.float32_ops.setdefault(node.op_type, plan.why)

    def _signature(self, f: ir.Function) -> tuple[dict[int, ir.DataType], dict[int, ir.DataType]] | None:
        """A function's float32 input and output types (its body planned first); None while it is
        being planned (a recursive call, which ONNX does not allow anyway)."""
        key = id(f)
        if key in self.signatures:
            return self.signatures[key]
        self.signatures[key] = None
        self._plan_owner(f)
        ins = {i: (self.low if self._read_low(v) else F32) for i, v in enumerate(f.inputs) if _is_f32(v)}
        for i, t in ins.items():
            self.fixed[id(f.inputs[i])] = t
        outs: dict[int, ir.DataType] = {}
        for j, v in enumerate(f.outputs):
            if _is_f32(v):
                outs[j] = self._produced(v, f) or F32
                self.out_want[(id(f), j)] = outs[j]
        self.signatures[key] = (ins, outs)
        return ins, outs

    def _plan_control_flow(self, node: ir.Node) -> None:
        for body in _bodies(node):
            self._plan_owner(body)
        plan = _Plan("linked")
        for g in _groups(node):
            if g.body_ins and g.body_outs:
                self._keep_accumulator_float32(g)
            t = self._group_type(g)
            if g.node_in is not None and _is_f32(node.inputs[g.node_in]):
                plan.in_types[g.node_in] = t
            if g.node_out is not None:
                plan.out_types[g.node_out] = t
            for v in g.body_ins:
                self.fixed[id(v)] = t
            for b, k in g.body_outs:
                self.out_want[(id(b), k)] = t
        self.plans[id(node)] = plan

    def _keep_accumulator_float32(self, g: _Group) -> None:
        """A carried state the body adds to (its output an Add/Sub/Sum reading its input) stays
        float32: the sum runs over every iteration, as a ReduceSum does over its axis."""
        body, k = g.body_outs[0]
        producer = body.outputs[k].producer()
        plan = self.plans.get(id(producer)) if producer is not None else None
        if (plan is not None and plan.mode == "low" and producer.op_type in ACCUMULATING_OPS
                and any(v is g.body_ins[0] for v in producer.inputs)):
            self.plans[id(producer)] = _Plan("f32", why="accumulation")
            self.result.float32_states += 1

    def _group_type(self, g: _Group) -> ir.DataType:
        produced = [self._produced(b.outputs[k], b) for b, k in g.body_outs]
        if self.low in produced:
            return self.low
        if F32 in produced:
            return F32
        # passed on unchanged, or only read (a scanned input): the type the body reads it in
        return self.low if any(self._read_low(v) for v in g.body_ins) else F32

    def _produced(self, v: ir.Value, owner: Owner) -> ir.DataType | None:
        """The type ``owner``'s node writes ``v`` in (None: no preference: an input or constant of
        the graph, a Cast, an outer value)."""
        if not _is_f32(v):
            return None
        if id(v) in self.fixed:
            return self.fixed[id(v)]
        node = v.producer()
        if node is None or node.graph is not _inner(owner) or node.op_type == "Constant":
            return None
        plan = self.plans.get(id(node))
        if plan is None or plan.mode == "cast":
            return None
        j = list(node.outputs).index(v)
        if plan.mode == "linked":
            return plan.out_types.get(j, F32)
        return self.low if plan.mode == "low" and j in plan.outputs else F32

    def _read_low(self, v: ir.Value) -> bool:
        return any(self._wanted(user, i) == self.low for user, i in v.uses())

    def _wanted(self, node: ir.Node, i: int) -> ir.DataType | None:
        """The type ``node`` reads at input ``i`` (None: any, a Cast)."""
        plan = self.plans.get(id(node))
        if plan is None:
            return F32
        if plan.mode == "cast":
            return None
        if plan.mode == "linked":
            return plan.in_types.get(i, F32)
        return self.low if plan.mode == "low" and i in plan.inputs else F32

    # -- rewriting ------------------------------------------------------------------------------

    def readers(self, v: ir.Value) -> dict[ir.DataType, list[Use]]:
        """What each reader of the float32 value ``v`` wants, read before anything changes."""
        by: dict[ir.DataType, list[Use]] = {}
        for user, i in v.uses():
            w = self._wanted(user, i)
            if w is not None:
                by.setdefault(w, []).append((user, i, None))
        if id(v) in self.output_ids:
            for owner in self.owners:
                for k, o in enumerate(owner.outputs):
                    if o is v:
                        want = self.io_type if owner is self.model.graph else self.out_want.get((id(owner), k), F32)
                        by.setdefault(want, []).append((None, k, owner))
        return by

    def run(self) -> LowFloatResult:
        self.plan()
        if self.kind == "bfloat16":
            self.result.compute = "float32"
        self.pending: list[tuple[ir.Value, ir.DataType, list[Use], ir.Node | None, Owner]] = []
        for owner in self.owners:
            self._rewrite(owner)
        for value, dtype, uses, producer, owner in self.pending:
            self._insert_cast(value, dtype, uses, producer, owner)
        return self.result

    def _retype(self, v: ir.Value, new: ir.DataType, producer: ir.Node | None, owner: Owner) -> None:
        by = self.readers(v)
        v.type = ir.TensorType(new)
        for dtype, uses in by.items():
            if dtype != new:
                self.pending.append((v, dtype, uses, producer, owner))

    def _rewrite(self, owner: Owner) -> None:
        kind, low = self.kind, self.low
        main = owner is self.model.graph
        for v in list(owner.inputs):
            if _is_f32(v):
                self._retype(v, self.io_type if main else self.fixed.get(id(v), F32), None, owner)
        if isinstance(owner, ir.Graph):
            for init_name, v in list(owner.initializers.items()):
                if not _is_f32(v) or v.const_value is None:
                    continue
                by = self.readers(v)
                if not by:
                    continue
                tensor = v.const_value
                if not _fits(tensor, kind):
                    self.result.kept_float32.append(init_name)
                    for dtype, uses in by.items():
                        if dtype != F32:
                            self.pending.append((v, dtype, uses, None, owner))
                    continue
                if _elements(tensor) >= WEIGHT_ELEMENTS or set(by) == {low}:
                    v.const_value = _convert_tensor(tensor, kind, init_name)
                    self._retype(v, low, None, owner)
                elif low in by:  # a small constant read both ways: a low copy beside the float32 one
                    copy_name = self.names(f"{init_name}_{kind}")
                    copy = ir.Value(name=copy_name, type=ir.TensorType(low), shape=v.shape,
                                    const_value=_convert_tensor(tensor, kind, copy_name))
                    owner.register_initializer(copy)
                    for user, i, _ in by[low]:
                        if user is not None:
                            user.replace_input_with(i, copy)

        for node in list(owner):
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and _is_f32(node.outputs[0]):
                self._rewrite_constant(node, owner)
                continue
            plan = self.plans.get(id(node))
            if plan is None:
                continue
            if plan.mode == "cast":
                self._rewrite_cast(node, owner)
                continue
            if plan.mode == "low":
                if node.op_type in STASH_TYPE_OPS:
                    node.attributes["stash_type"] = ir.AttrInt64("stash_type", 1)
                if node.op_type == "Attention":
                    node.attributes["softmax_precision"] = ir.AttrInt64("softmax_precision", int(F32))
            for j, out in enumerate(node.outputs):
                # a control-flow node's outputs match its body's, read or not
                if not _is_f32(out) or (plan.mode != "linked" and not _used(out, self.output_ids)):
                    continue
                if plan.mode == "linked":
                    new = plan.out_types.get(j, F32)
                else:
                    new = low if plan.mode == "low" and j in plan.outputs else F32
                self._retype(out, new, node, owner)

    def _rewrite_constant(self, node: ir.Node, owner: Owner) -> None:
        kind, low = self.kind, self.low
        v = node.outputs[0]
        by = self.readers(v)
        attr = node.attributes.get("value")
        if attr is None or attr.type != ir.AttributeType.TENSOR or not by:
            return
        tensor = attr.value
        big = _elements(tensor) >= WEIGHT_ELEMENTS
        if not _fits(tensor, kind) or not (big or set(by) == {low}):
            if low in by and _fits(tensor, kind):  # a small constant read both ways: a low copy beside it
                copy = ir.Value(name=self.names(f"{v.name}_{kind}"), type=ir.TensorType(low), shape=v.shape)
                const = ir.Node("", "Constant", [], [ir.AttrTensor("value", _convert_tensor(tensor, kind, copy.name))],
                                outputs=[copy], name=f"{copy.name}_node")
                owner.insert_after(node, const)
                for user, i, _ in by[low]:
                    if user is not None:
                        user.replace_input_with(i, copy)
            return
        node.attributes["value"] = ir.AttrTensor("value", _convert_tensor(tensor, kind, v.name))
        if owner is not self.model.graph and big:
            self.result.body_weights += 1
        self._retype(v, low, node, owner)

    def _rewrite_cast(self, node: ir.Node, owner: Owner) -> None:
        """A Cast to float32 takes whatever type its readers want: a second Cast of the same input
        when readers differ, never a Cast in front of or behind it."""
        low = self.low
        out = node.outputs[0]
        by = self.readers(out)
        if set(by) == {low}:
            node.attributes["to"] = ir.AttrInt64("to", int(low))
            out.type = ir.TensorType(low)
        elif low in by:
            twin = _cast_node(node.inputs[0], low, self.names(f"{out.name}_{self.kind}"))
            owner.insert_after(node, twin)
            for user, i, graph in by[low]:
                if user is not None:
                    user.replace_input_with(i, twin.outputs[0])
                else:
                    self._set_output(graph, i, out, twin.outputs[0])

    def _set_output(self, owner: Owner, k: int, old: ir.Value, new: ir.Value) -> None:
        """Output ``k`` of ``owner`` becomes ``new`` under ``old``'s name (the value it replaces is
        renamed): the main graph's output names are the model's interface."""
        name = old.name
        old.name = self.names(f"{name}_{self.kind}")
        new.name = name
        owner.outputs[k] = new

    def _insert_cast(self, value: ir.Value, dtype: ir.DataType, uses: list[Use], producer: ir.Node | None,
                     owner: Owner) -> None:
        """One Cast per (value, type) right after its producer (a source: at the top of its graph),
        for its node readers, nested bodies' included, and the outputs of its own graph; a body
        output reading an outer value gets its own Cast in that body."""
        node_uses = [(u, i) for u, i, _ in uses if u is not None]
        own = [k for u, k, g in uses if u is None and g is owner]
        foreign = [(g, k) for u, k, g in uses if u is None and g is not owner]
        if node_uses or own:
            cast = _cast_node(value, dtype, self.names(f"{value.name}_{ir.DataType(dtype).name.lower()}"))
            if producer is not None:
                owner.insert_after(producer, cast)
            elif len(owner):
                owner.insert_before(next(iter(owner)), cast)
            else:
                owner.append(cast)
            for user, i in node_uses:
                user.replace_input_with(i, cast.outputs[0])
            for k in own:
                self._set_output(owner, k, value, cast.outputs[0])
        for g, k in foreign:
            cast = _cast_node(value, dtype, self.names(f"{value.name}_{ir.DataType(dtype).name.lower()}"))
            g.append(cast)
            g.outputs[k] = cast.outputs[0]


def _elements(tensor: ir.TensorProtocol) -> int:
    return int(np.prod([int(d) for d in tensor.shape]))


def convert_low_float(model: ir.Model, kind: str, keep_io_types: bool, runtime: Any) -> LowFloatResult:
    """Rewrite ``model``'s float32 work into ``kind`` (``"float16"``/``"bfloat16"``) in place: the
    main graph, the bodies of its If/Loop/Scan nodes and its functions. ``runtime``: the export
    target's kernel table (``Target.runtime()``), where the plan reads which ops have low-float kernels.

    The plan reads every value's dtype; values a pass made without one (the precision stage's
    dequantizing ``Gather``/``Cast``/``Mul`` of an int8 table, before the export's shape inference)
    would be invisible to it, and a weight they read converted while they stayed float32, so they
    are typed first by onnx's inference."""
    if any(v.dtype is None for g in all_graphs(model) for node in g for v in node.outputs if v is not None):
        infer_shapes(model)
    return _LowFloat(model, kind, keep_io_types, runtime).run()


__all__ = ["FLOAT32_OPS", "LOW_TYPES", "LowFloatResult", "STASH_TYPE_OPS", "convert_low_float"]

"""One check of the model's inputs in place of its max pools' NaN guards.

A max pool's guard (:func:`jax2onnx.fusion.max_pool`) is ``If(IsNaN(ReduceSum(x)), exact, y)`` on
the pool's input ``x``. Inside a net it costs more than its sum: the ``If`` reads ``x`` and the
pool's result, so onnxruntime materializes both in plain NCHW memory where it would run Conv →
MaxPool → the output's layout change in its blocked (NCHWc) layout (a ResNet stem, one thread:
27.2 ms guarded against 23.4 ms bare; ``bench/max_pool_nan_guard.py``). Where the pools' inputs
are computed from the model's float inputs by ops whose growth
:func:`jax2onnx.fusion.nan_free.bound_given` bounds (Transpose, Conv, MatMul, Gemm and
BatchNormalization with constant weights, Relu, Add, Mul, ...), a finite input bounded by ``T``
makes every such ``x`` finite, hence NaN-free, and each bare pool exact. This pass then rewrites
the model as

    plain = the graph with its pools bare                  # the main graph, as if unguarded
    bad = Not(Less(ReduceL1(input), T))                    # one read of the input
    outputs = If(bad, then: a copy of the graph as it was (guards and all), else: plain)

``ReduceL1`` is NaN when the input holds a NaN and inf when it holds an infinity or its sum
overflows, and it is at least the largest ``|element|`` in whatever order the runtime adds (each
rounded partial sum of non-negative terms is at least each term), so ``Less(.., T)`` holds only
for a finite input bounded by ``T``; any other input takes the copy, exact for every input, after
the plain graph ran. ``T`` is the first of :data:`LIMITS` the bound proves (a batch of 64 images of
224×224×3 bytes sums to about 2^30). The plain graph stays in the main graph because onnxruntime
runs a branch's Conv whose weights are outer-scope initializers without its blocked layout (twice
as slow); the ``If`` costs a copy of the outputs (a classifier's logits: nothing).

Left as they were: guards whose input the bound does not reach from float32/float64 graph inputs
(a pool after a Log, a Div by a variable, a dtype without that range), and all of them when the
inputs hold no fewer elements than the guarded values together (a pool on the input itself: its
guard reads no more). Weights stay initializers of the main graph, read by the copy too: the
model grows by its nodes only. The pass runs after ``precision=`` (its quantized ops are not
bounded: no hoist) and before the I/O names, on the main graph.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from ..fusion.nan_free import NAN_GUARD_KEY, bound_given, guarded_input
from ..ir.graphs import FreshNames
from .dead_code import DeadCodeEliminationPass
from .manager import is_op

#: the input bounds tried, largest first (powers of two: exact in float32)
LIMITS = (2.0**64, 2.0**48)
_SOURCE_DTYPES = (ir.DataType.FLOAT, ir.DataType.DOUBLE)


def _plain_result(guard: ir.Node) -> ir.Value | None:
    """The bare pool's result a guard's ``else`` branch passes on (an outer value)."""
    plain = guard.attributes["else_branch"].value
    ident = plain.outputs[0].producer() if len(plain.outputs) == 1 else None
    return ident.inputs[0] if is_op(ident, "Identity") and ident.graph is plain else None


def _ancestor_inputs(value: ir.Value, inputs: list[ir.Value]) -> list[ir.Value]:
    """The graph inputs among ``inputs`` that ``value`` is computed from, in the graph's order."""
    wanted, found, seen, stack = {id(v) for v in inputs}, set(), set(), [value]
    while stack:
        v = stack.pop()
        if v is None or id(v) in seen:
            continue
        seen.add(id(v))
        if id(v) in wanted:
            found.add(id(v))
        node = v.producer()
        if node is not None:
            stack.extend(node.inputs)
    return [v for v in inputs if id(v) in found]


def _elements(values: list[ir.Value]) -> tuple[int, tuple[str, ...]] | None:
    """How many elements ``values`` hold together, as (static factor sum, symbolic dims) when they
    all share one set of symbolic dims (the batch "B", say); None when a shape is unknown."""
    total, symbols = 0, None
    for v in values:
        if v.shape is None:
            return None
        static, named = 1, []
        for d in v.shape:
            if isinstance(d, int):
                static *= d
            elif getattr(d, "value", None) is not None:
                named.append(str(d.value))
            else:
                return None
        if symbols is not None and tuple(sorted(named)) != symbols:
            return None
        symbols, total = tuple(sorted(named)), total + static
    return None if symbols is None else (total, symbols)


def _smaller(sources: list[ir.Value], checked: list[ir.Value]) -> bool:
    """The sources hold fewer elements than the guarded values together (for the same sizes the
    pools' own guards, beside them, cost no more)."""
    a, b = _elements(sources), _elements(checked)
    return a is not None and b is not None and a[1] == b[1] and a[0] < b[0]


class _Cloner:
    """Copies nodes (and their subgraphs) with fresh value names; values it has not copied (graph
    inputs, initializers) are read as they are: outer values of the branch the copies go to."""

    def __init__(self, fresh: FreshNames, suffix: str):
        self.fresh, self.suffix = fresh, suffix
        self.values: dict[int, ir.Value] = {}

    def value(self, v: ir.Value | None) -> ir.Value | None:
        return None if v is None else self.values.get(id(v), v)

    def _new_value(self, v: ir.Value) -> ir.Value:
        copy = ir.Value(name=self.fresh(f"{v.name or 'v'}{self.suffix}"), type=v.type, shape=v.shape,
                        const_value=v.const_value)
        self.values[id(v)] = copy
        return copy

    def node(self, node: ir.Node) -> ir.Node:
        attributes = []
        for attr in node.attributes.values():
            if attr.type == ir.AttributeType.GRAPH:
                attributes.append(ir.AttrGraph(attr.name, self.graph(attr.value)))
            elif attr.type == ir.AttributeType.GRAPHS:
                attributes.append(ir.AttrGraphs(attr.name, [self.graph(g) for g in attr.value]))
            else:
                attributes.append(attr)  # immutable values, shared
        copy = ir.Node(node.domain, node.op_type, [self.value(v) for v in node.inputs], attributes=attributes,
                       overload=node.overload, num_outputs=len(node.outputs), version=node.version,
                       name=self.fresh(f"{node.name or node.op_type}{self.suffix}"))
        copy.metadata_props.update(node.metadata_props)
        for old, new in zip(node.outputs, copy.outputs):
            new.name = self.fresh(f"{old.name or 'v'}{self.suffix}")
            new.type, new.shape = old.type, old.shape
            self.values[id(old)] = new
        return copy

    def graph(self, graph: ir.Graph) -> ir.Graph:
        inputs = [self._new_value(v) for v in graph.inputs]
        initializers = [self._new_value(v) for v in graph.initializers.values()]
        nodes = [self.node(n) for n in graph]
        return ir.Graph(inputs, [self.value(v) for v in graph.outputs], nodes=nodes, initializers=initializers,
                        name=f"{graph.name or 'body'}{self.suffix}", opset_imports=dict(graph.opset_imports))


class NanGuardHoistPass(ir.passes.InPlacePass):
    """The max pools' NaN guards become one check of the model's inputs (module doc)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        inputs = [v for v in graph.inputs if v.dtype in _SOURCE_DTYPES]
        plain_results: dict[int, ir.Value] = {}
        sources: list[ir.Value] = []
        checked: list[ir.Value] = []
        limit = max(LIMITS)
        for node in graph:
            x = guarded_input(node)
            y = _plain_result(node) if x is not None else None
            found = _ancestor_inputs(x, inputs) if y is not None else []
            proved = next((t for t in LIMITS if found and bound_given(x, dict.fromkeys(found, t)) is not None), None)
            if proved is None:
                continue
            plain_results[id(node)] = y
            checked.append(x)
            sources += [s for s in found if all(s is not t for t in sources)]
            limit = min(limit, proved)
        if not plain_results or not _smaller(sources, checked):
            return ir.passes.PassResult(model, False)
        outputs = list(graph.outputs)
        names = [v.name for v in outputs]
        if any(v.producer() is None for v in outputs) or len({id(v) for v in outputs}) < len(outputs):
            return ir.passes.PassResult(model, False)  # an input, a constant or one value twice: named as it is
        fresh = FreshNames(model)
        opsets = dict(graph.opset_imports)
        # the graph as it is, guards and all, copied into the branch for inputs that fail the check
        cloner = _Cloner(fresh, "_exact")
        exact_nodes = [cloner.node(n) for n in graph]
        exact = ir.Graph([], [cloner.value(v) for v in outputs], nodes=exact_nodes, name="nan_checked_input_exact",
                         opset_imports=opsets)
        # the main graph runs the bare pools
        graph.outputs.clear()
        bypassed = {id(node.outputs[0]): plain_results[id(node)] for node in graph if id(node) in plain_results}
        for guard_output, y in [(v, bypassed[id(v)]) for node in graph for v in node.outputs if id(v) in bypassed]:
            ir.convenience.replace_all_uses_with(guard_output, y)  # the guard goes with the dead code
        outputs = [bypassed.get(id(v), v) for v in outputs]
        passed = ir.Graph([], [], nodes=[], name="nan_checked_input_plain", opset_imports=opsets)
        for v in outputs:
            ident = ir.Node("", "Identity", [v], num_outputs=1, name=fresh("output_plain"))
            ident.outputs[0].name = fresh(f"{v.name}_plain")
            ident.outputs[0].type, ident.outputs[0].shape = v.type, v.shape
            passed.append(ident)
            passed.outputs.append(ident.outputs[0])
        check = self._check(sources, limit, fresh)
        hoisted = ir.Node("", "If", [check[-1].outputs[0]], num_outputs=len(outputs), name=fresh("nan_checked_input"),
                          attributes=[ir.AttrGraph("then_branch", exact), ir.AttrGraph("else_branch", passed)])
        hoisted.metadata_props[NAN_GUARD_KEY] = "model_inputs"
        for name, old, new in zip(names, outputs, hoisted.outputs):
            old.name = fresh(f"{name}_unchecked")  # a bypassed guard keeps it until dead code goes
            new.name, new.type, new.shape = name, old.type, old.shape
        graph.extend([*check, hoisted])
        graph.outputs.extend(hoisted.outputs)
        DeadCodeEliminationPass()(model)  # the bypassed guards and their sums
        return ir.passes.PassResult(model, True)

    @staticmethod
    def _check(sources: list[ir.Value], limit: float, fresh: FreshNames) -> list[ir.Node]:
        """``Not(Less(ReduceL1(s), limit) for every source s, and-ed)``: true unless every source is
        finite and bounded by ``limit``."""
        made: list[ir.Node] = []
        within: ir.Value | None = None
        for s in sources:
            total = ir.Node("", "ReduceL1", [s], attributes=[ir.AttrInt64("keepdims", 0)], num_outputs=1)
            bound = ir.Node("", "Constant", [], num_outputs=1, attributes=[
                ir.AttrTensor("value", ir.tensor(np.array(limit, s.dtype.numpy()), name=fresh(f"{s.name}_limit")))])
            below = ir.Node("", "Less", [total.outputs[0], bound.outputs[0]], num_outputs=1)
            made += [total, bound, below]
            if within is not None:
                made.append(ir.Node("", "And", [within, below.outputs[0]], num_outputs=1))
            within = made[-1].outputs[0]
        made.append(ir.Node("", "Not", [within], num_outputs=1))
        for n in made:
            n.name = fresh(f"input_nan_check_{n.op_type}")
            n.outputs[0].name = fresh(f"input_nan_check_{n.op_type.lower()}")
        made[-1].outputs[0].type = ir.TensorType(ir.DataType.BOOL)
        made[-1].outputs[0].shape = ir.Shape([])
        return made


__all__ = ["LIMITS", "NanGuardHoistPass"]

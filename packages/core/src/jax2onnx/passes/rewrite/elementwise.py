"""Recognise elementwise functions of one value, however they are written, and put their compact
form in their place: exact and tanh GELU, the normal CDF, erfc, SiLU/Swish, sigmoid.

A library writes GELU as ``0.5 * x * (1 + erf(x / sqrt 2))``, as ``x * norm.cdf(x)``, or, like
``jax.nn.gelu(approximate=False)`` (which Hugging Face's Flax models capture with
``functools.partial`` at import, out of reach of a patch), through ``erfc(-x / sqrt 2)``; tanh GELU
comes with ``x**3`` or ``x*x*x``, ``0.5*x`` or ``x/2``... Matching each spelling structurally
misses the next one. Instead:

1. every value computed from a single value ``x`` by elementwise ops and size-1 constants is
   grouped under ``x`` (its *region*);
2. each region value is a candidate ``y = f(x)`` (the largest first); its *cone* is the region
   nodes it depends on;
3. the cones of one ``x`` are evaluated together with onnx's reference evaluator on probe points
   (a dense grid of [-12, 12] and magnitudes up to 1e30) and ``f`` is compared with each known
   function (float64 references);
4. a match whose compact form has fewer nodes than the cone replaces ``y``'s readers' input; the
   cone is left to dead-code elimination (its values may still be read elsewhere).

A candidate matches only if it agrees with the known function at every probe in [-12, 12]
(rtol 2e-5 plus an absolute 2e-6 (1 + |x|) for the cancellation of hand-written forms in their
tails) and at every larger probe where it is finite; tanh GELU and exact GELU differ by 4e-4
at x = -3, so neither passes for the other. float32 only: onnxruntime has no float64 Erf or Gelu,
and the float64 lowerings are exact already.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx_ir as ir

from ...forms import SQRT_HALF, erfc, gelu_exact, gelu_tanh, normal_cdf, sigmoid, silu
from ...ir.constants import constant_tensor
from ..rules import RuleFamily, record
from .emit import Emitter, taken_names
from .evaluate import evaluate

#: Ops computing each output element from the same element of each input (and a size-1 constant).
ELEMENTWISE_OPS = frozenset({
    "Abs", "Add", "And", "Cast", "Ceil", "Clip", "Cos", "Div", "Equal", "Erf", "Exp", "Floor", "Greater",
    "GreaterOrEqual", "Identity", "IsInf", "IsNaN", "Less", "LessOrEqual", "Log", "Max", "Min", "Mul", "Neg", "Not",
    "Or", "Pow", "Reciprocal", "Relu", "Sigmoid", "Sign", "Sin", "Softplus", "Sqrt", "Sub", "Tanh", "Where", "Xor",
})


def _erfc(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erfc, otypes=[np.float64])(x)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


@dataclasses.dataclass(frozen=True)
class Known:
    name: str  # the rule's name in the export's rewrite counts
    reference: Callable[[np.ndarray], np.ndarray]  # float64
    form: Callable[[Any, Any, int], Any]  # (emitter, x, opset) -> value


KNOWN = (
    Known("gelu_exact", lambda x: 0.5 * x * _erfc(-x * SQRT_HALF), gelu_exact),
    Known("gelu_tanh", _gelu_tanh, gelu_tanh),
    Known("normal_cdf", lambda x: 0.5 * _erfc(-x * SQRT_HALF), normal_cdf),
    Known("erfc", _erfc, erfc),
    Known("silu", lambda x: x * _sigmoid(x), silu),
    Known("sigmoid", _sigmoid, sigmoid),
)

_WIDE = np.array([0.0, 1e-30, 1e-6, 1e-3, 20.0, 50.0, 1e3, 1e6, 1e15, 1e30])
PROBES = np.concatenate([np.linspace(-12.0, 12.0, 961), _WIDE, -_WIDE]).astype(np.float32)
_CORE = np.abs(PROBES) <= 12.0


_REFERENCE_VALUES: dict[int, np.ndarray] = {}


def matches(reference: Callable[[np.ndarray], np.ndarray], got: np.ndarray) -> bool:
    if got.size != PROBES.size:  # the value does not follow x's shape: not a function of x alone
        return False
    x = PROBES.astype(np.float64)
    want = _REFERENCE_VALUES.get(id(reference))
    if want is None:
        want = _REFERENCE_VALUES.setdefault(id(reference), reference(x))
    got = got.reshape(PROBES.shape).astype(np.float64)
    with np.errstate(invalid="ignore"):
        close = np.abs(got - want) <= 2e-5 * np.abs(want) + 2e-6 * (1 + np.abs(x))
    close |= (got == want)  # infinities
    finite = np.isfinite(got) & np.isfinite(want)
    if not np.all(close[_CORE]):
        return False
    return bool(np.all(close[~_CORE] | ~finite[~_CORE]))


def _is_scalar_constant(v: ir.Value) -> bool:
    t = constant_tensor(v)
    return t is not None and int(np.prod([int(d) for d in t.shape])) == 1


def _is_elementwise(node: ir.Node) -> bool:
    return node.domain in ("", "ai.onnx") and node.op_type in ELEMENTWISE_OPS and len(node.outputs) == 1


class _Region:
    """The values computed from one ``x``, in graph order."""

    def __init__(self, x: ir.Value) -> None:
        self.x = x
        self.nodes: list[ir.Node] = []


def _regions(graph: ir.Graph | ir.Function) -> tuple[dict[int, _Region], dict[int, _Region]]:
    """(region by id of x, region by id of each value in it)."""
    by_root: dict[int, _Region] = {}
    of_value: dict[int, _Region] = {}
    for node in graph:
        if not _is_elementwise(node):
            continue
        roots: dict[int, ir.Value] = {}
        for v in node.inputs:
            if v is None or _is_scalar_constant(v):
                continue
            region = of_value.get(id(v))
            root = region.x if region is not None else v
            roots[id(root)] = root
        if len(roots) != 1:
            continue
        (root,) = roots.values()
        if root.dtype != ir.DataType.FLOAT:
            continue
        region = by_root.setdefault(id(root), _Region(root))
        region.nodes.append(node)
        of_value[id(node.outputs[0])] = region
    return by_root, of_value


def _cone(y: ir.Value, region: _Region, of_value: dict[int, _Region]) -> list[ir.Node]:
    """The region's nodes ``y`` depends on, in graph order."""
    seen: set[int] = set()
    stack = [y.producer()]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for v in node.inputs:
            if v is not None and of_value.get(id(v)) is region:
                stack.append(v.producer())
    return [n for n in region.nodes if id(n) in seen]


def _evaluate(region: _Region, cones: dict[int, list[ir.Node]], ys: list[ir.Value], opset: int) -> list[np.ndarray] | None:
    """The candidates' values at the probe points, by onnx's reference evaluator (None when the
    region cannot be evaluated on its own)."""
    keep = {id(n) for cone in cones.values() for n in cone}
    nodes = [n for n in region.nodes if id(n) in keep]
    return evaluate(nodes, ys, opset, feeds={region.x: PROBES})


def _drop_unread(graph: ir.Graph | ir.Function, cone: list[ir.Node]) -> None:
    """Remove the replaced cone's nodes nothing reads any more (last first), so that a value
    inside it is not taken for a candidate of its own."""
    returned = {id(v) for v in graph.outputs}
    for node in reversed(cone):
        if all(not v.uses() and id(v) not in returned for v in node.outputs):
            graph.remove(node, safe=True)


class ElementwiseFunctions(RuleFamily):
    """The rule family: one call rewrites every recognised function of every graph (a search over
    regions, not per-node rules: it records what it writes, it does not explain misses)."""

    name = "elementwise"
    #: every known function is transcendental: a region of arithmetic, comparisons, Abs, Sqrt, Relu,
    #: ... alone is piecewise algebraic and cannot match one on the probe grid (Pow: ``e ** -x``)
    start_ops = frozenset({"Erf", "Exp", "Tanh", "Sigmoid", "Softplus", "Pow", "Log", "Cos", "Sin"})

    def run(self, model: ir.Model, counts: dict[str, int]) -> bool:
        modified = False
        for graph in self.graphs_of(model):
            tried: set[int] = set()
            while self._rewrite_one(graph, tried, counts):
                modified = True
        return modified

    def _rewrite_one(self, graph: ir.Graph | ir.Function, tried: set[int], counts: dict[str, int]) -> bool:
        by_root, of_value = _regions(graph)
        returned = {id(v) for v in graph.outputs}
        for region in by_root.values():
            # every value of the region is a candidate, not only those read outside it: in
            # gelu(x) + norm.cdf(x) both terms are functions of x inside one larger one
            # (values a replacement left unread are dead code, not candidates)
            ys = [y for y in (node.outputs[0] for node in region.nodes)
                  if id(y) not in tried and y.dtype == ir.DataType.FLOAT and (y.uses() or id(y) in returned)]
            cones = {id(y): _cone(y, region, of_value) for y in ys}
            ys = [y for y in ys if len(cones[id(y)]) > 1]
            if not ys:
                continue
            values = _evaluate(region, cones, ys, self.opset)
            if values is None:
                tried.update(id(y) for y in ys)
                continue
            for y, got in sorted(zip(ys, values), key=lambda p: -len(cones[id(p[0])])):
                for known in KNOWN:
                    written = (self._replace(graph, region.x, y, known, len(cones[id(y)]))
                               if matches(known.reference, got) else None)
                    if written is not None:
                        record(written, self.label(known.name))
                        counts[known.name] = counts.get(known.name, 0) + 1
                        _drop_unread(graph, cones[id(y)])
                        return True
                tried.add(id(y))  # matched nothing: its function does not change when others are replaced
        return False

    def _replace(self, graph: ir.Graph | ir.Function, x: ir.Value, y: ir.Value, known: Known,
                 cone_size: int) -> list[ir.Node] | None:
        """The nodes written in ``y``'s place; None when the form is not more compact."""
        # Count the form's nodes on a stand-in first: nodes made on x itself would be among x's uses.
        dry = Emitter(graph, ir.Value(type=x.type, shape=x.shape), "dry", set())
        known.form(dry, dry.like, self.opset)
        if sum(n.op_type != "Constant" for n in dry.nodes) >= cone_size:
            return None  # already as compact
        m = Emitter(graph, x, f"rewrite_{known.name}", taken_names(graph))
        new = known.form(m, x, self.opset)
        # A function body's nodes belong to its inner graph (node.graph is function.graph): without
        # unwrapping it, a form in a function was put first, before the producer of x.
        owner = graph.graph if isinstance(graph, ir.Function) else graph
        m.insert_after(x.producer() if x.producer() is not None and x.producer().graph is owner else None)
        new.type, new.shape = y.type, y.shape
        was_output = [i for i, v in enumerate(graph.outputs) if v is y]
        for i in was_output:  # the output keeps its name
            graph.outputs[i] = new
        if was_output:
            name, y.name = y.name, m.fresh("replaced")
            new.name = name
        ir.convenience.replace_all_uses_with(y, new)
        return m.nodes

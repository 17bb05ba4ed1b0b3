"""Rewrite rules as data: each rule is a pattern, a condition and a replacement.

A :class:`Rule` names the op types its pattern starts from (``anchors``), a ``match(graph, node)``
that reads the pattern and checks the conditions at one such node, and a
``replace(graph, node, found)`` that writes the replacement from what ``match`` found. ``match``
changes nothing: it returns what the replacement needs, or a :class:`Miss` saying in words why the
rule does not apply there — :func:`no_match` when the nodes are not the pattern at all,
:func:`miss` when they are and a condition failed (a near miss: a LayerNorm whose epsilon is
computed, a Gemm whose bias is not a vector). So the same rule both rewrites and explains.

Rules come in families (:class:`RuleFamily`, one module per concern under :mod:`.rewrite`); a
family is one pass of the rewrite stage and declares what it needs (:mod:`.pipeline`: shapes
inferred, no dead readers), so the stage runs shape inference and dead-code removal once where
needed. Targets list the families they add (:attr:`jax2onnx.targets.Target.rewrites`).

What is recorded: every node a rule writes (or changes in place) carries its rule in its
``metadata_props["jax2onnx:rule"]`` (``family/rule``); the model keeps the counts per rule in
``metadata_props["jax2onnx:rewrites"]``. :func:`explain` runs the rules' ``match`` on a model
(an exported one: what fired is gone, what is left are the near misses) and returns, per rule, the
first failed condition with its node; ``jax2onnx.verification.report.summarize(model,
explain=True)`` shows it.

Why not onnxscript's rewriter (the model for this shape): our rules read chains with several
spellings of one computation (a mean as ReduceMean or ReduceSum times 1/n, kept or unsqueezed
axes, a scale inside or after the factor), follow reader counts, and one family (elementwise)
recognises functions by evaluating a subgraph on probe points; written as onnxscript's fixed
target graphs each spelling would be a pattern of its own, and its ``MatchResult`` reasons are
not tied to our report or our per-node record. The rule type here is small and on onnx_ir alone
(onnxscript would install with our pins; see docs/architecture.md, "Where a rule goes"); the chains
a ``match`` reads are written as data with :mod:`.patterns` (commutative operands, bound dims,
variants, and the same :class:`Miss` explanations).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar

import onnx_ir as ir

from .manager import NO_DEAD_CODE, SHAPES, all_graphs

#: node metadata: the rule that wrote (or changed) the node, ``family/rule``
RULE_KEY = "jax2onnx:rule"
#: model metadata: how often each rule fired, a JSON object
REWRITES_KEY = "jax2onnx:rewrites"


class Miss:
    """Why a rule does not apply at a node. Falsy, so a matcher can hand one up unchanged
    (``if not found: return found``). ``near``: the pattern matched and a condition failed."""

    __slots__ = ("near", "reason")

    def __init__(self, reason: str, near: bool) -> None:
        self.reason, self.near = reason, near

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"{'miss' if self.near else 'no_match'}({self.reason!r})"


def miss(reason: str) -> Miss:
    """The pattern is there and a condition failed: ``reason`` says which, in words."""
    return Miss(reason, near=True)


def no_match(reason: str) -> Miss:
    """The nodes are not the rule's pattern."""
    return Miss(reason, near=False)


def node_label(node: ir.Node | None) -> str:
    """How an explanation names a node: its name, else its op and first output's name."""
    if node is None:
        return "?"
    if node.name:
        return f"'{node.name}'"
    out = node.outputs[0].name if node.outputs else None
    return f"{node.op_type} -> '{out}'"


def value_label(value: ir.Value | None) -> str:
    """How an explanation names a value: its name and, when computed, its producer."""
    if value is None:
        return "an omitted input"
    producer = value.producer()
    where = f" (computed by {producer.op_type} {node_label(producer)})" if producer is not None else ""
    return f"'{value.name}'{where}"


@dataclasses.dataclass(frozen=True)
class Rule:
    """A pattern, a condition and a replacement (see the module doc).

    Args:
        name: the rule's name in the counts and the node record (``matmul_bias_gemm``).
        anchors: the op types the pattern starts from (in ``domain``); only those nodes are tried.
        match: ``match(graph, node)`` → what ``replace`` needs, or a :class:`Miss`; changes nothing.
        replace: ``replace(graph, node, found)`` writes the replacement; it may return nodes it
            changed in place (the nodes it inserts are found and recorded without that).
        domain: the anchors' domain (``""``: the standard one; a pack's rule may start from a
            runtime's own op, ``"com.microsoft"``).
    """

    name: str
    anchors: frozenset[str]
    match: Callable[[Any, ir.Node], Any]
    replace: Callable[[Any, ir.Node, Any], Iterable[ir.Node] | None]
    domain: str = ""


@dataclasses.dataclass(frozen=True)
class RuleMiss:
    """One rule's near misses on a model: the first failed condition, at its node."""

    rule: str  # family/rule
    node: str
    op_type: str
    reason: str
    misses: int  # candidates where a condition failed
    fired: int  # candidates where the rule would apply now

    def __str__(self) -> str:
        more = f" (and {self.misses - 1} more)" if self.misses > 1 else ""
        return f"{self.rule} at {self.op_type} {self.node}: {self.reason}{more}"


def read_counts(model: ir.Model) -> dict[str, int]:
    return json.loads(model.metadata_props.get(REWRITES_KEY, "{}"))


def write_counts(model: ir.Model, counts: dict[str, int]) -> None:
    model.metadata_props[REWRITES_KEY] = json.dumps(dict(sorted(counts.items())))


def record(nodes: Iterable[ir.Node], label: str) -> None:
    """Mark ``nodes`` as written by the rule ``label``."""
    for node in nodes:
        node.metadata_props[RULE_KEY] = label


def _is_candidate(node: ir.Node, rule: Rule) -> bool:
    standard = ("", "ai.onnx")
    return node.op_type in rule.anchors and node.domain in (standard if rule.domain in standard else (rule.domain,))


class RuleFamily(ir.passes.InPlacePass):
    """Rules of one concern, a pass of the rewrite stage. A family lists its :meth:`rules` (run in
    order, each over every graph of its :attr:`scope`) and may say why none can run on a model
    (:meth:`unavailable`: the op it writes is newer than the model's opset). Families whose rules
    are not per-node (elementwise: a search over regions) override :meth:`run` and mark what they
    write with :func:`record`.

    Declared for the pass pipeline (:mod:`.pipeline`): the rules read ranks and axis lengths off
    intermediate values (``needs`` shapes), and what one replaced still reads its inputs until dead
    code goes, which the next family's "read only by" conditions must not see (``needs`` no dead
    code, ``produces_dead_code``); the values a rule writes carry their types and shapes
    (``keeps_shapes``)."""

    name: ClassVar[str] = ""
    needs: ClassVar[frozenset[str]] = frozenset({SHAPES, NO_DEAD_CODE})
    produces_dead_code: ClassVar[bool] = True
    keeps_shapes: ClassVar[bool] = True
    #: which graphs the rules read: "all" (subgraphs and function bodies too), "graphs" (not
    #: function bodies: a replacement adds initializers), "main" (the main graph alone)
    scope: ClassVar[str] = "all"

    def __init__(self, opset: int = 0) -> None:
        super().__init__()
        self.opset = opset

    def rules(self) -> Sequence[Rule]:
        return ()

    @property
    def start_ops(self) -> frozenset[str]:
        """The op types some rule starts from: a model holding none skips the stage."""
        return frozenset().union(*(rule.anchors for rule in self.rules()))

    def unavailable(self) -> str | None:
        """Why no rule of this family can fire at ``self.opset`` (None: they can)."""
        return None

    def graphs_of(self, model: ir.Model) -> list[ir.Graph | ir.Function]:
        if self.scope == "main":
            return [model.graph]
        graphs = list(all_graphs(model))
        return graphs if self.scope == "all" else [g for g in graphs if isinstance(g, ir.Graph)]

    def label(self, rule: str) -> str:
        return f"{self.name}/{rule}"

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        counts = read_counts(model)
        modified = self.run(model, counts)
        write_counts(model, counts)
        return ir.passes.PassResult(model, modified)

    def run(self, model: ir.Model, counts: dict[str, int]) -> bool:
        """Every rule in turn on every graph; counts what fired. Whether anything did."""
        if self.unavailable() is not None:
            return False
        modified = False
        for rule in self.rules():
            modified = self.run_rule(rule, self.graphs_of(model), counts) or modified
        return modified

    def run_rule(self, rule: Rule, graphs: Iterable[ir.Graph | ir.Function], counts: dict[str, int]) -> bool:
        """``rule`` at every candidate node still in its graph when reached (a rewrite removes
        nodes), in graph order; every node it writes records it."""
        modified = False
        for graph in list(graphs):
            with self.recording(graph, rule.name) as recording:
                for node in list(graph):
                    if node.graph is not graph or not _is_candidate(node, rule):
                        continue
                    found = rule.match(graph, node)
                    if isinstance(found, Miss) or not found:
                        continue
                    recording.changing()
                    recording.touched.extend(rule.replace(graph, node, found) or ())
                    counts[rule.name] = counts.get(rule.name, 0) + 1
                    modified = True
        return modified

    def recording(self, graph: ir.Graph | ir.Function, rule: str) -> _Recording:
        """A context in which the nodes inserted into ``graph`` after its ``changing()`` (and those
        added to its ``touched``) are recorded as written by ``rule``."""
        return _Recording(graph, self.label(rule))

    def explain(self, model: ir.Model) -> Iterator[RuleMiss]:
        """Per rule with near misses on ``model``, the first (see :func:`explain`)."""
        why_not = self.unavailable()
        for rule in self.rules():
            first: tuple[ir.Node, str] | None = None
            misses = fired = 0
            for graph in self.graphs_of(model):
                for node in graph:
                    if node.graph is not graph or not _is_candidate(node, rule):
                        continue  # the nodes run_rule tries, no others
                    found = rule.match(graph, node)
                    if isinstance(found, Miss):
                        if not found.near:
                            continue
                        reason = found.reason
                    elif not found:
                        continue
                    elif why_not is not None:
                        reason = why_not
                    else:
                        fired += 1
                        continue
                    misses += 1
                    first = first or (node, reason)
            if first is not None:
                yield RuleMiss(self.label(rule.name), node_label(first[0]), first[0].op_type, first[1], misses, fired)


class _Recording:
    """On leaving, records ``label`` on the nodes inserted into ``graph`` after the first
    :meth:`changing` call and on those in ``touched`` (changed in place)."""

    def __init__(self, graph: ir.Graph | ir.Function, label: str) -> None:
        self.graph, self.label = graph, label
        self.touched: list[ir.Node] = []
        self.before: set[ir.Node] | None = None

    def changing(self) -> None:
        """Call before each change: the first takes the graph's nodes as they were (held, so no
        new node can take a freed node's id); a graph nothing changes costs no snapshot."""
        if self.before is None:
            self.before = set(self.graph)

    def __enter__(self) -> _Recording:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            if self.before is not None:
                record([n for n in self.graph if n not in self.before], self.label)
            record(self.touched, self.label)


def explain(model: ir.Model, families: Iterable[RuleFamily]) -> list[RuleMiss]:
    """Why ``families``' rules do not fire on ``model``: for each rule with candidate nodes where
    its pattern matched and a condition failed, the first such node and condition (and how many
    more). On an exported model what fired is already replaced, so these are the near misses."""
    return [found for family in families for found in family.explain(model)]


__all__ = ["NO_DEAD_CODE", "REWRITES_KEY", "RULE_KEY", "SHAPES", "Miss", "Rule", "RuleFamily", "RuleMiss", "explain",
           "miss", "no_match", "node_label", "read_counts", "record", "value_label", "write_counts"]

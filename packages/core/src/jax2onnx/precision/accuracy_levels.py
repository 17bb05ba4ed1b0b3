"""``Precision("int4", accuracy_level="auto")``: each ``MatMulNBits``' accuracy level, measured.

onnxruntime's CPU ``MatMulNBits`` computes at ``accuracy_level=1`` in float32 from the 4-bit
weights; at ``accuracy_level=4`` it quantizes its input to int8 in blocks of ``block_size`` along K
(one scale per block, max|x| / 127) and multiplies in int8, several times faster for a decode
step. A block holding one large activation rounds its other entries coarsely, and on models with
outlier activations that flips greedy tokens. ``"auto"`` measures that error layer by layer and
keeps level 1 only where it is large:

1. the data: the calibration batches when given, else :func:`probe_batches` (a few random
   batches drawn as the graph's inputs allow);
2. after the weights are quantized (each ``MatMulNBits`` written at level 1), the main graph runs
   in onnxruntime a segment at a time (the calibration runner, :class:`.calibration.SegmentRunner`),
   depth by depth, giving each main-graph ``MatMulNBits``' input rows as the int4 model computes
   them; at most :data:`MAX_ROWS` rows per layer are kept: half those whose largest entry stands
   furthest above their RMS (the rows level 4 rounds worst), half drawn at random (seed 0);
3. each ``MatMulNBits`` runs alone in onnxruntime on its rows at level 1 and at level 4 (the same
   weights); its error is the largest relative error of one row, ``|y4 - y1| / |y1|``. At most
   :data:`MAX_LEVEL4_ERROR`: level 4; above it: level 1, and the precision's detail (the model's
   metadata, the report) lists the layer with its error;
4. for an LM (a model with an embedding table) the *head check*: the graph outputs a
   ``MatMulNBits`` writes (the logits) are computed on the same data with every layer at level 1
   and with the chosen ones at 4; while some row's argmax moved, or more than
   :data:`MAX_AT_RISK_SHARE` of the rows have their top two entries no more than twice the largest
   change level 4 made to that row apart (:func:`at_risk`: level 4 could swap them), the half of
   the chosen layers with the largest errors goes back to level 1 (listed as kept by the head
   check). Per-layer errors alone do not bound token flips: a random-weight model's logits
   are near ties everywhere, and level 4 in any one layer moves its greedy tokens.

``MatMulNBits`` inside function or control-flow bodies (stacked layer weights a ``Scan`` slices)
are not reached by the runner and keep level 1; the detail lists them too. Cost: one run of the
model per batch (a segment at a time, as calibration), two small sessions per layer, and for an LM
one more such run per head-check round (at most about log2 of the layers, plus the reference). Streamed
weights (:class:`~jax2onnx.Weights`) those runs use are read from their source once per run, as
calibration reads them, besides the read that writes them.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Sequence

import numpy as np
import onnx
import onnx_ir as ir

from ..ir.graphs import all_graphs
from ..progress import current as current_progress
from ..targets.precision_forms import MS_DOMAIN, weight_form
from .calibration import SegmentRunner, cpu_session, segment_depths
from .options import PrecisionError
from .quantized_ops import is_embedding

#: a layer whose worst row's relative error at level 4 (against level 1) exceeds this keeps level 1.
#: Standard normal inputs to a 768 x 768 layer measured 0.005-0.007 at blocks 16-256; one input
#: channel 100x the others 0.012-0.015 at block 32 (packages/core/tests/test_accuracy_levels.py
#: checks a layer of each kind on either side of it in onnxruntime).
MAX_LEVEL4_ERROR = 0.01
#: the head check's tolerance: the share of rows (logits) whose top two entries may lie within
#: twice level 4's change (none may swap). A tiny LM trained on a counting language measured 1 of
#: 640 on its own language with every layer at 4 (its greedy tokens all kept), 4.5% on random
#: tokens; the random-weight test models 28-32%.
MAX_AT_RISK_SHARE = 0.01
#: the rows per layer the check runs (the worst-rounded half and a random half)
MAX_ROWS = 256
#: the probe set: this many batches of one example (each symbolic leading axis 1), each other
#: symbolic axis this long
PROBE_BATCHES = 16
PROBE_AXIS = 8

#: ops between a head and the graph output it writes
_TO_OUTPUT_OPS = frozenset({"Reshape", "Transpose", "Identity", "Squeeze", "Unsqueeze", "Cast", "Add"})
#: ops an integer input passes through on its way to a Gather's indices (casts, reshapes, the
#: negative-index wrap ``Where(i < 0, i + n, i)``)
_INDEX_OPS = frozenset({"Cast", "Reshape", "Identity", "Unsqueeze", "Squeeze", "Flatten", "Where", "Add", "Sub",
                        "Mod", "Clip", "Max", "Min", "Expand", "Transpose"})


@dataclasses.dataclass
class Plan:
    """The check's data (``data`` names it in the detail) and whether the model is an LM (an
    embedding table: its head's argmax is a token), read before the weights are quantized."""

    batches: Sequence[tuple[np.ndarray, ...]]
    data: str
    lm: bool

    def choose(self, model: ir.Model) -> LevelChoice:
        return choose_accuracy_levels(model, self.batches, self.data, lm=self.lm)


def plan(model: ir.Model, p) -> Plan | None:
    """The check ``p`` asks for (int4 as MatMulNBits with ``accuracy_level="auto"``), or None."""
    if not (p.kind == "int4" and p.accuracy_level == "auto" and weight_form("int4", p.int4_kernel).accuracy_levels):
        return None

    lm = any(is_embedding(node, model.graph) for g in all_graphs(model) for node in g)
    if p.calibration:
        return Plan(p.calibration, f"{len(p.calibration)} calibration batch(es)", lm)
    return Plan(probe_batches(model), "probe set", lm)


def probe_batches(model: ir.Model) -> tuple[tuple[np.ndarray, ...], ...]:
    """:data:`PROBE_BATCHES` input batches for a model without calibration data (seed 0): a
    symbol that is the first axis of an input (the batch) is 1, every other symbolic axis
    :data:`PROBE_AXIS` (an axis written as an expression of symbols, such as an LM's
    ``sequence_length + past_sequence_length``, its value: an LM's probe is one sequence of 8
    tokens after 8 cached ones); float inputs standard normal, integer inputs that index a table
    (reach a ``Gather``'s indices through casts, reshapes and index arithmetic) uniform over its
    rows, other integer inputs 1, booleans True."""
    rng = np.random.default_rng(0)
    ranges = _index_ranges(model.graph)
    symbols = {d.value: 1 for v in model.graph.inputs if v.shape is not None and len(v.shape)
               for d in v.shape[:1] if isinstance(getattr(d, "value", None), str)}
    batches = []
    for _ in range(PROBE_BATCHES):
        arrays = []
        for v in model.graph.inputs:
            shape = tuple(_axis_size(d, symbols) for d in v.shape) if v.shape is not None else (PROBE_AXIS,)
            dtype = np.dtype(v.dtype.numpy()) if v.type is not None else np.dtype(np.float32)
            if dtype.kind == "f":
                arrays.append(rng.standard_normal(shape).astype(dtype))
            elif dtype.kind in "iu" and v.name in ranges:
                arrays.append(rng.integers(0, ranges[v.name], shape).astype(dtype))
            else:
                arrays.append(np.ones(shape, dtype))
        batches.append(tuple(arrays))
    return tuple(batches)


def _axis_size(dim: object, symbols: dict[str, int]) -> int:
    if isinstance(dim, int):
        return dim
    text = getattr(dim, "value", None)
    if not isinstance(text, str):
        return PROBE_AXIS
    try:
        value = _evaluate(ast.parse(text, mode="eval").body, symbols)
    except (SyntaxError, ValueError):
        return PROBE_AXIS
    return max(1, value)


def _evaluate(node: ast.AST, symbols: dict[str, int]) -> int:
    """An axis expression of symbols (``symbols``' value, else :data:`PROBE_AXIS`), integers and ``+ - * //``."""
    if isinstance(node, ast.Name):
        return symbols.get(node.id, PROBE_AXIS)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return node.value
    if isinstance(node, ast.BinOp):
        a, b = _evaluate(node.left, symbols), _evaluate(node.right, symbols)
        ops = {ast.Add: a + b, ast.Sub: a - b, ast.Mult: a * b}
        if type(node.op) in ops:
            return ops[type(node.op)]
        if isinstance(node.op, ast.FloorDiv) and b:
            return a // b
    raise ValueError("not an axis expression")


def _index_ranges(graph: ir.Graph) -> dict[str, int]:
    """Graph input name → the rows of the smallest constant table a ``Gather`` indexes by it."""
    inputs = {id(v): v for v in graph.inputs}
    ranges: dict[str, int] = {}
    for node in graph:
        if node.op_type != "Gather" or node.domain not in ("", "ai.onnx") or len(node.inputs) < 2:
            continue
        table = node.inputs[0]
        axis = next((a.value for a in node.attributes.values() if a.name == "axis"), 0)
        if table is None or table.const_value is None or table.shape is None or not isinstance(table.shape[axis], int):
            continue
        rows = table.shape[axis]
        stack, seen = [node.inputs[1]], set()
        while stack:
            v = stack.pop()
            if v is None or id(v) in seen:
                continue
            seen.add(id(v))
            if id(v) in inputs:
                ranges[v.name] = min(rows, ranges.get(v.name, rows))
                continue
            producer = v.producer()
            if producer is None or producer.op_type not in _INDEX_OPS or producer.domain not in ("", "ai.onnx"):
                continue
            stack.extend(producer.inputs[1:] if producer.op_type == "Where" else producer.inputs)
    return ranges


@dataclasses.dataclass
class LevelChoice:
    """What the check chose: ``level4`` / ``kept`` (name → error) / ``unchecked`` weight names."""

    data: str
    level4: list[str] = dataclasses.field(default_factory=list)
    kept: dict[str, float] = dataclasses.field(default_factory=dict)
    errors: dict[str, float] = dataclasses.field(default_factory=dict)  # every checked layer's error
    unchecked: list[str] = dataclasses.field(default_factory=list)
    argmax_kept: list[str] = dataclasses.field(default_factory=list)  # within the bound, kept by the head check
    heads_skipped: str | None = None  # why the head check did not run
    heads: list[str] = dataclasses.field(default_factory=list)  # the outputs the head check compared
    failed: str | None = None  # why nothing was checked (the data did not run)

    def describe(self) -> str:
        worst = max((self.errors[name] for name in self.level4), default=None)
        parts = [f"accuracy_level auto on the {self.data}: {len(self.level4)} MatMulNBits at level 4"
                 + (f" (level-4 error at most {worst:.3g})" if worst is not None else "")]
        if self.kept:
            listed = ", ".join(f"{name} ({err:.3g})" for name, err in self.kept.items())
            parts.append(f"{len(self.kept)} kept at level 1 (level-4 error over {MAX_LEVEL4_ERROR:g}): {listed}")
        if self.argmax_kept:
            parts.append(f"{len(self.argmax_kept)} kept at level 1 by the head check (with them at level 4 the argmax of "
                         f"{', '.join(self.heads)} could change on the {self.data}): {', '.join(self.argmax_kept)}")
        if self.heads_skipped:
            parts.append(f"head check not run ({self.heads_skipped})")
        if self.unchecked:
            why = self.failed or "inside function or control-flow bodies"
            parts.append(f"{len(self.unchecked)} at level 1 unchecked ({why}): {', '.join(self.unchecked)}")
        return "; ".join(parts)


def weight_name(node: ir.Node) -> str:
    """The quantized weight's name (its codes are ``<weight>_q4``)."""
    return re.sub(r"_q4(_\d+)?$", "", node.inputs[1].name or node.name or "?")


def _is_nbits(node: ir.Node) -> bool:
    """A 4-bit MatMulNBits: the 8-bit ones (int8 weights, an int8 LM head) keep the level the int8
    form fixes (jax2onnx.targets.precision_forms.INT8_ACCURACY_LEVEL: at 1 their kernel widens the weight every call)."""
    if node.op_type != "MatMulNBits" or node.domain != MS_DOMAIN:
        return False
    bits = node.attributes.get("bits")
    return bits is None or bits.as_int() == 4


def _set_level(node: ir.Node, level: int) -> None:
    node.attributes["accuracy_level"] = ir.AttrInt64("accuracy_level", level)


def choose_accuracy_levels(model: ir.Model, batches: Sequence[tuple[np.ndarray, ...]], data: str, *,
                           lm: bool = False) -> LevelChoice:
    """Level 4 on each main-graph ``MatMulNBits`` whose measured error allows it and, for an LM
    (``lm``), that leaves its head's argmax alone (see the module); every other ``MatMulNBits`` is
    set to level 1."""

    choice = LevelChoice(data)
    checked = []
    for g in all_graphs(model):
        for node in g:
            if _is_nbits(node):
                _set_level(node, 1)
                constant = all(v is None or v.const_value is not None for v in node.inputs[1:])
                if g is model.graph and constant:
                    checked.append(node)
                else:
                    choice.unchecked.append(weight_name(node))
    if not checked:
        return choice
    try:
        rows = _input_rows(model, checked, batches)
    except Exception as exc:  # noqa: BLE001 - onnxruntime refused the data: every layer keeps level 1, said so
        if type(exc).__module__.split(".")[0] != "onnxruntime":
            raise
        choice.failed = f"the {data} did not run in onnxruntime: {str(exc).splitlines()[0][:200]}"
        choice.unchecked = [weight_name(n) for n in checked] + choice.unchecked
        return choice
    heads = head_outputs(model.graph) if lm else []
    try:
        reference = _head_rows(model, batches, heads, checked) if heads else None  # every layer at level 1 still
    except PrecisionError as exc:  # a segment over protobuf's 2 GiB does not run from memory
        reference, choice.heads_skipped = None, str(exc).split(";")[0]
    reporter = current_progress()
    reporter.steps("choosing accuracy levels", len(checked))
    passed = []
    for node in checked:
        name = weight_name(node)
        error = level4_error(node, rows.pop(id(node)))
        choice.errors[name] = error
        if error <= MAX_LEVEL4_ERROR:
            passed.append(node)
        else:
            choice.kept[name] = error
        reporter.step()
    # the head check: level 1 back on the largest-error half of the rest while an output's argmax may move
    passed.sort(key=lambda n: choice.errors[weight_name(n)])
    while passed:
        for node in passed:
            _set_level(node, 4)
        if reference is None or head_check_passes(reference, _head_rows(model, batches, heads, checked)):
            break
        for node in passed[len(passed) // 2:]:
            _set_level(node, 1)
            choice.argmax_kept.append(weight_name(node))
        passed = passed[: len(passed) // 2]
    choice.level4 = [weight_name(n) for n in passed]
    positions = [v.name for v in model.graph.outputs]  # named by position: the output names come later
    choice.heads = [f"output {positions.index(name)}" for name in heads]
    return choice


def head_outputs(graph: ir.Graph) -> list[str]:
    """The float graph outputs a ``MatMulNBits`` writes (through reshapes, casts and a bias
    ``Add``): an LM's logits, a classifier's scores, whose argmax the head check keeps."""
    names = []
    for out in graph.outputs:
        v: ir.Value | None = out
        for _ in range(16):
            node = v.producer() if v is not None else None
            if node is None:
                break
            if _is_nbits(node):
                if out.dtype == ir.DataType.FLOAT and out.shape is not None and len(out.shape) >= 2:
                    names.append(out.name)
                break
            if node.op_type not in _TO_OUTPUT_OPS or node.domain not in ("", "ai.onnx"):
                break
            v = next((x for x in node.inputs if x is not None and x.const_value is None), None)
    return names


def _head_rows(model: ir.Model, batches: Sequence[tuple[np.ndarray, ...]], names: list[str],
               nodes: list[ir.Node]) -> list[np.ndarray]:
    """The outputs in ``names`` as rows ``[R, last axis]``, per batch, computed as the model stands,
    a segment at a time (up to each depth of ``nodes`` in turn, as :func:`_input_rows` runs it)."""
    runner = SegmentRunner(model, batches)
    for group in _stages(model, nodes):
        for _ in runner.run(list(dict.fromkeys(n.inputs[0].name for n in group)), {}):
            pass
    return [np.asarray(outs[name], np.float32).reshape(-1, outs[name].shape[-1])
            for outs in runner.run(names, {}) for name in names]


def _stages(model: ir.Model, nodes: list[ir.Node]) -> list[list[ir.Node]]:
    """``nodes`` grouped by depth (the most of them on a path from the inputs to one's input), in order."""
    for k, node in enumerate(nodes):
        if not node.inputs[0].name:
            node.inputs[0].name = f"accuracy_level_input_{k}"
    depth = segment_depths(model, {id(n) for n in nodes})
    groups: dict[int, list[ir.Node]] = {}
    for node in nodes:
        groups.setdefault(depth.get(node.inputs[0].name, 0), []).append(node)
    return [groups[d] for d in sorted(groups)]


def head_check_passes(reference: list[np.ndarray], got: list[np.ndarray]) -> bool:
    """No row's argmax moved, and at most :data:`MAX_AT_RISK_SHARE` of the rows are at risk."""
    rows = sum(len(r) for r in reference)
    moved = sum(int(np.count_nonzero(np.argmax(r, -1) != np.argmax(g, -1))) for r, g in zip(reference, got, strict=True))
    return moved == 0 and at_risk(reference, got) <= MAX_AT_RISK_SHARE * rows


def at_risk(reference: list[np.ndarray], got: list[np.ndarray]) -> int:
    """How many rows could change their argmax: a row whose top two entries (at level 1) are at
    most twice the largest change level 4 made to any of its entries apart (a change that
    large can swap them; an argmax that moved is one of these)."""
    count = 0
    for ref, new in zip(reference, got, strict=True):
        top = np.partition(ref, -2, axis=-1)[:, -2:]
        count += int(np.count_nonzero(top[:, 1] - top[:, 0] <= 2 * np.max(np.abs(new - ref), axis=-1)))
    return count


def _input_rows(model: ir.Model, nodes: list[ir.Node], batches: Sequence[tuple[np.ndarray, ...]]) -> dict[int, np.ndarray]:
    """id(node) → up to :data:`MAX_ROWS` rows ``[R, K]`` of its input over every batch, the main
    graph run a segment at a time, depth by depth (as calibration runs it)."""
    runner = SegmentRunner(model, batches)
    stages = _stages(model, nodes)
    rows: dict[int, np.ndarray] = {}
    for done, group in enumerate(stages):
        # the values only later stages read are let go (as calibration does)
        heads = [runner.producer[n.inputs[0].name] for later in stages[done:] for n in later
                 if n.inputs[0].name in runner.producer]
        runner.useful = {id(n) for n in runner._segment(heads, set())}
        taps = list(dict.fromkeys(n.inputs[0].name for n in group))
        gathered: dict[str, list[np.ndarray]] = {t: [] for t in taps}
        for outs in runner.run(taps, {}):
            for t in taps:
                x = np.asarray(outs[t], dtype=np.float32)
                gathered[t].append(x.reshape(-1, x.shape[-1]))
        sampled = {t: sample_rows(np.concatenate(parts)) for t, parts in gathered.items()}
        for n in group:
            rows[id(n)] = sampled[n.inputs[0].name]
    return rows


def sample_rows(x: np.ndarray) -> np.ndarray:
    """At most :data:`MAX_ROWS` rows of ``x``: half with the largest max|x| / RMS, half at random."""
    if len(x) <= MAX_ROWS:
        return x
    rms = np.sqrt(np.mean(x * x, axis=1)) + 1e-30
    crest = np.max(np.abs(x), axis=1) / rms
    worst = np.argsort(-crest)[: MAX_ROWS // 2]
    rest = np.setdiff1d(np.arange(len(x)), worst)
    drawn = np.random.default_rng(0).choice(rest, MAX_ROWS - len(worst), replace=False)
    return x[np.sort(np.concatenate([worst, drawn]))]


def level4_error(node: ir.Node, rows: np.ndarray) -> float:
    """The largest relative error of one row of ``node``'s output at level 4 against level 1,
    both run in onnxruntime on ``rows`` with ``node``'s own weights."""

    inputs = ["rows"]
    initializers = []
    for k, v in enumerate(node.inputs[1:], start=1):
        if v is None:
            inputs.append("")
            continue
        tensor = ir.serde.serialize_tensor(v.const_value)
        tensor.name = f"input_{k}"
        initializers.append(tensor)
        inputs.append(tensor.name)
    attrs = {a.name: a.value for a in node.attributes.values() if a.name != "accuracy_level"}
    nodes = [onnx.helper.make_node("MatMulNBits", inputs, [f"y{level}"], domain=MS_DOMAIN, accuracy_level=level, **attrs)
             for level in (1, 4)]
    K, N = attrs["K"], attrs["N"]
    proto = onnx.helper.make_model(
        onnx.helper.make_graph(nodes, "accuracy_level_check",
                               [onnx.helper.make_tensor_value_info("rows", onnx.TensorProto.FLOAT, [None, K])],
                               [onnx.helper.make_tensor_value_info(f"y{level}", onnx.TensorProto.FLOAT, [None, N])
                                for level in (1, 4)], initializers),
        opset_imports=[onnx.helper.make_opsetid("", 21), onnx.helper.make_opsetid(MS_DOMAIN, 1)])
    y1, y4 = cpu_session(proto).run(None, {"rows": np.ascontiguousarray(rows, dtype=np.float32)})
    norm = np.linalg.norm(y1, axis=1)
    error = np.linalg.norm(y4 - y1, axis=1) / np.maximum(norm, 1e-30)
    return float(np.max(np.where(norm > 0, error, 0.0)))


__all__ = ["MAX_LEVEL4_ERROR", "MAX_ROWS", "LevelChoice", "choose_accuracy_levels", "level4_error", "probe_batches",
           "sample_rows"]

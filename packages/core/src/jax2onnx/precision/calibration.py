"""Calibrated int4 (``Precision("int4", calibration=[...], method="gptq" | "awq")``), layer by
layer: the activations each weight matmul multiplies, gathered by running the export on the
calibration batches in onnxruntime, turned into the codes of :mod:`.gptq`.

Layer by layer (sequential, as GPTQ does): the calibrated matmuls are grouped by *depth*, the
largest number of calibrated matmuls on any path from the graph inputs to the one's input (Q, K
and V of a layer share a depth; the attention output projection is one deeper, the MLP's up
projection one deeper again). Depth by depth:

1. the part of the main graph that computes the group's inputs and was not run yet (a *segment*)
   is cut out as its own ONNX model, its inputs the values earlier segments left (graph inputs,
   the residual stream, masks), and run in onnxruntime on every batch;
2. ``X^T X`` of each input (rows = every position of every batch) is accumulated in JAX, and the
   group's weights get their codes;
3. later segments read those weights *dequantized*, so the next group's inputs come through the
   already quantized layers, as the deployed model computes them.

Memory: one segment's weights and session, the values later segments read (one layer's
activations per batch) and one ``[K, K]`` Hessian per distinct input of the group; the chosen
codes (one byte per weight entry) stay until the weights are written.

Stacked layer weights a ``Scan`` slices (``lax.scan`` / ``nnx.scan`` over layers) or a ``Loop``
body picks one layer of (``w[i]`` in a ``lax.fori_loop``) are calibrated per layer: in the
calibration copy the body's matmul input (and, in a ``Loop``, the index picking the layer)
becomes an extra scan output, so one run gives every iteration's inputs and each goes to its
layer's ``[K, K]`` Hessian. The layers of one stack are calibrated together from that run (layer
``l``'s inputs come through float32 layers ``< l`` of the same stack; earlier groups are
quantized). Matmuls inside function bodies and other control-flow bodies stay round-to-nearest;
the precision's detail lists them.

Held-out rows: every :data:`HOLDOUT_EVERY`-th row of each matmul's input (counted across the
batches in order; one row per position, a token of an LM) is held out of ``X^T X``. The method
chooses codes from the other rows, and each weight (each layer of a stacked one) keeps them only
where their output error on the held-out rows, ``||X_held (W - W_q)||``, is below
round-to-nearest's; elsewhere it is rounded (a flat weight then gets plain int4's codes). A weight
with fewer held-out rows than both its inputs ``K`` and the directions its fitted rows span
(eigenvalues of their ``X^T X`` above 1% of the largest) is rounded without a method: so few rows
leave directions of its input unmeasured, and per-weight wins measured on them did not hold on
fresh data (the LLM pack's tiny decoder on 48 random tokens: two such wins made the logits 9% worse
than plain int4's). Inputs spanning few directions (correlated features) are judged from fewer
rows; :data:`HOLDOUT_EVERY` rows per input feature always suffice, and a warning names that many
(for the widest input) when a weight was rounded for want of rows. Few rows let GPTQ fit their
noise and end up worse than rounding; this keeps a calibrated export from being worse than plain
int4 matmul by matmul. The choices and the held-out errors are in the precision's detail. The
held-out rows are drawn from the calibration data, so they cannot tell how far deployed inputs
differ from it.

Progress: :func:`reporting_layers` installs a callback called once per calibrated group.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir

from ..errors import RUNTIME_INSTALL_HINT
from ..progress import current as current_progress
from ..targets.base import default_target
from .gptq import awq_clip_blocks, dequantized, gptq_blocks, output_error, rtn_blocks
from .options import Precision, PrecisionError

Blocks = tuple[np.ndarray, np.ndarray, np.ndarray]

#: every this-many-th row of a matmul's calibration inputs is held out to judge the method's codes;
#: a weight needs as many held-out rows as its inputs span directions (at most ``K``, so
#: ``HOLDOUT_EVERY * K`` rows in all always do), else it is rounded and the export warns
HOLDOUT_EVERY = 4

#: ``callback(done, total, weights)`` after each calibrated group: ``done`` groups of ``total``
#: finished, ``weights`` the names of the weights that group chose codes for
LayerCallback = Callable[[int, int, list[str]], None]
_LAYER_CALLBACK: contextvars.ContextVar[LayerCallback | None] = contextvars.ContextVar("calibration_layers",
                                                                                       default=None)


@contextlib.contextmanager
def reporting_layers(callback: LayerCallback) -> Iterator[None]:
    """Within the block, calibrated exports call ``callback(done, total, weights)`` after each
    group of weights (a progress bar's hook)."""
    token = _LAYER_CALLBACK.set(callback)
    try:
        yield
    finally:
        _LAYER_CALLBACK.reset(token)


#: the export's target while the precision stage runs (:func:`measuring_on`): its sessions run there
_TARGET: contextvars.ContextVar[Any] = contextvars.ContextVar("precision_target", default=None)


@contextlib.contextmanager
def measuring_on(target: Any) -> Iterator[None]:
    """Within the block, the precision stage's sessions (calibration, accuracy levels, QDQ ranges)
    run on ``target``'s verification providers (``Target.inference_session``)."""
    token = _TARGET.set(target)
    try:
        yield
    finally:
        _TARGET.reset(token)


@dataclasses.dataclass
class MatmulSite:
    """A main-graph weight matmul to calibrate: ``node`` reads ``a`` (``[..., K]``) times
    ``load()`` (``[K, N]``, or ``[N, K]`` when ``transposed``) in input ``slot``."""

    node: ir.Node
    a: ir.Value
    name: str
    load: Callable[[], np.ndarray]
    transposed: bool
    K: int


@dataclasses.dataclass
class StackedSite:
    """A stacked weight ``[layers, K, N]`` read one layer per iteration by a body matmul whose input
    is ``body_a``: scan input ``slot`` of a main-graph ``Scan`` (``reverse``: scanned from the last
    layer), or (``slot`` None) the main-graph initializer ``name`` a main-graph ``Loop`` body picks
    the layer ``index`` (a body value) of. ``key``: what :class:`Calibrated` files its blocks under."""

    scan: ir.Node
    slot: int | None
    body_a: ir.Value
    name: str
    load: Callable[[], np.ndarray]
    transposed: bool
    K: int
    layers: int
    key: object
    reverse: bool = False
    index: ir.Value | None = None


def cpu_session(proto):
    """An onnxruntime session of ``proto`` from memory on the export target's verification providers
    (:func:`measuring_on`; outside the stage the default target's): the calibration runner's, the
    accuracy level check's and the QDQ ranges'."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise PrecisionError(f"calibration runs the export in onnxruntime, which is not installed: "
                             f"{RUNTIME_INSTALL_HINT}") from exc
    if proto.ByteSize() >= 2**31:  # protobuf's limit; onnxruntime takes the segment from memory here
        raise PrecisionError(f"calibration runs the model one segment at a time in onnxruntime from memory, and one "
                             f"segment is {proto.ByteSize() / 2**30:.1f} GiB, over protobuf's 2 GiB; calibrate a smaller "
                             "model, or use plain int4 (method='rtn') for this one")
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.enable_cpu_mem_arena = False  # one session per segment: an arena would outlive its use in the heap
    return (_TARGET.get() or default_target()).inference_session(ort, proto.SerializeToString(), options)


def _shown(shape: ir.Shape | None) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]" if shape is not None else "[?]"


def checked_feed(inputs: Sequence[ir.Value], batch: tuple[np.ndarray, ...], i: int) -> dict[str, np.ndarray]:
    """``batch`` checked against the graph inputs (count, rank, every fixed axis, a numeric kind
    the input takes) and cast to their dtypes; the first mismatch raises naming what the export
    expects."""
    if len(batch) != len(inputs):
        names = ", ".join(x.name or "?" for x in inputs)
        raise PrecisionError(f"calibration batch {i} has {len(batch)} array(s); the export has {len(inputs)} input(s) "
                             f"({names}): give one array per input, in order")
    feed = {}
    for j, (arr, spec) in enumerate(zip(batch, inputs, strict=True)):
        shown = _shown(spec.shape)
        if spec.shape is not None:
            if arr.ndim != len(spec.shape):
                raise PrecisionError(f"calibration batch {i}, input {j} ({spec.name!r}) has shape {arr.shape}; the "
                                     f"export's input is {shown}: give arrays of rank {len(spec.shape)}")
            for axis, (got, need) in enumerate(zip(arr.shape, spec.shape, strict=True)):
                if isinstance(need, int) and got != need:
                    what = "width (last axis)" if axis == arr.ndim - 1 else f"axis {axis}"
                    raise PrecisionError(f"calibration batch {i}, input {j} ({spec.name!r}) has shape {arr.shape}; "
                                         f"the export's input is {shown}: its {what} must be {need}, got {got}")
        dtype = spec.dtype.numpy() if spec.type is not None else arr.dtype
        if np.issubdtype(dtype, np.integer) and not np.issubdtype(arr.dtype, np.integer):
            raise PrecisionError(f"calibration batch {i}, input {j} ({spec.name!r}) is {arr.dtype}; the export's input "
                                 f"is {spec.dtype.name.lower()} {shown} (token ids, indices): give integer arrays")
        feed[spec.name] = np.asarray(arr).astype(dtype, copy=False)
    return feed


def _graphs_of(node: ir.Node) -> list[ir.Graph]:
    out: list[ir.Graph] = []
    for attr in node.attributes.values():
        if attr.type == ir.AttributeType.GRAPH:
            out.append(attr.value)
        elif attr.type == ir.AttributeType.GRAPHS:
            out.extend(attr.value)
    return out


def _reads(node: ir.Node) -> list[str]:
    """Names of the values ``node`` reads: its inputs and what its bodies read from outer scopes."""
    return [v.name for v in node.inputs if v is not None and v.name] + _outer_reads(node)


def _outer_reads(node: ir.Node) -> list[str]:
    """Names of the values the bodies of ``node`` (Scan, Loop, If) read from outer scopes."""
    names: list[str] = []
    for g in _graphs_of(node):
        local = {v.name for v in g.inputs} | set(g.initializers)
        for inner in g:
            names.extend(n for n in _reads(inner) if n not in local)
            local.update(v.name for v in inner.outputs)
    return names


class SegmentRunner:
    """Runs the main graph a segment at a time on every batch, keeping only the values a segment
    not run yet reads. ``replaced[(id(node), slot)]``: an array that segment copies of ``node``
    read in input ``slot`` (a weight already quantized, dequantized)."""

    def __init__(self, model: ir.Model, batches: Sequence[tuple[np.ndarray, ...]]):
        self.model = model
        self.nodes = list(model.graph)
        self.index = {id(n): k for k, n in enumerate(self.nodes)}
        self.producer = {v.name: n for n in self.nodes for v in n.outputs}
        self.done: set[int] = set()
        self.useful: set[int] = {id(n) for n in self.nodes}  # the nodes some tap needs; the rest never runs
        self.replaced: dict[tuple[int, int], np.ndarray] = {}
        self.replaced_initializers: dict[str, np.ndarray] = {}  # by name, for every reader (a Loop body's)
        self.cache = [checked_feed(model.graph.inputs, tuple(batch), i) for i, batch in enumerate(batches)]

    def _segment(self, wanted: list[ir.Node], rerun: set[int]) -> list[ir.Node]:
        seen: set[int] = set()
        stack = list(wanted)
        while stack:
            n = stack.pop()
            if id(n) in seen or (id(n) in self.done and id(n) not in rerun):
                continue
            seen.add(id(n))
            for slot, v in enumerate(n.inputs):
                if v is not None and (id(n), slot) not in self.replaced and v.name in self.producer:
                    stack.append(self.producer[v.name])
            stack.extend(self.producer[name] for name in _outer_reads(n) if name in self.producer)
        return sorted((self.nodes[self.index[k]] for k in seen), key=lambda n: self.index[id(n)])

    def run(self, taps: list[str], scan_taps: dict[int, list[tuple[str, str]]]) -> Iterator[dict[str, np.ndarray]]:
        """Per batch, the values named in ``taps`` (main-graph values, or the extra scan outputs of
        ``scan_taps``: id(scan node) → (body value, output name) each)."""
        wanted = [self.producer[t] for t in taps if t in self.producer and t not in self.cache[0]]
        wanted += [n for n in self.nodes if id(n) in scan_taps]
        segment = self._segment(wanted, set(scan_taps))
        produced = {v.name for n in segment for v in n.outputs}
        in_segment = {id(n) for n in segment}
        # what later segments read: the nodes still to run, and the tapped Scans/Loops, which run again
        # once their stacked weights are quantized (their own outputs here came from float32 layers)
        later = [n for n in self.nodes if id(n) in self.useful and id(n) not in self.done
                 and (id(n) not in in_segment or id(n) in scan_taps)]
        read_later = {r for n in later for r in _reads(n)}
        keep = sorted(v.name for n in segment if id(n) not in scan_taps for v in n.outputs if v.name in read_later)
        fetch = list(dict.fromkeys([*taps, *keep]))
        session = self._build(segment, produced, fetch, scan_taps) if segment else None
        for feed in self.cache:
            outs = dict(zip(fetch, session.run(fetch, {k: feed[k] for k in self._needs(segment, produced)})) if session else {})
            feed.update({k: outs[k] for k in keep})
            yield {t: outs[t] if t in outs else feed[t] for t in taps}
        self.done.update(id(n) for n in segment if id(n) not in scan_taps)
        still = {r for n in self.nodes if id(n) in self.useful and id(n) not in self.done for r in _reads(n)}
        for feed in self.cache:
            for k in [k for k in feed if k not in still]:
                del feed[k]
        # a dequantized weight is a float32 copy: kept only while a node still to run reads it
        for key in [key for key in self.replaced if key[0] in self.done]:
            del self.replaced[key]
        for name in [name for name in self.replaced_initializers if name not in still]:
            del self.replaced_initializers[name]

    def _needs(self, segment: list[ir.Node], produced: set[str]) -> list[str]:
        inits = self.model.graph.initializers
        names = {name for n in segment for slot, name in self._inputs(n) if name not in produced and name not in inits}
        return sorted(names)

    def _inputs(self, n: ir.Node) -> list[tuple[int, str]]:
        direct = [(slot, v.name) for slot, v in enumerate(n.inputs) if v is not None and (id(n), slot) not in self.replaced]
        return direct + [(-1, name) for name in _outer_reads(n)]

    def _build(self, segment: list[ir.Node], produced: set[str], fetch: list[str],
               scan_taps: dict[int, list[tuple[str, str]]]):
        import onnx

        graph = onnx.GraphProto(name="calibration_segment")
        inits = self.model.graph.initializers
        used: set[str] = set()
        for n in segment:
            proto = ir.serde.serialize_node(n)
            for slot, _ in enumerate(n.inputs):
                if (id(n), slot) in self.replaced:
                    name = f"{proto.input[slot]}__calibrated_{self.index[id(n)]}_{slot}"
                    proto.input[slot] = name
                    graph.initializer.append(onnx.numpy_helper.from_array(self.replaced[id(n), slot], name))
            if id(n) in scan_taps:
                _tap_scan(proto, scan_taps[id(n)])
            graph.node.append(proto)
            used.update(name for _, name in self._inputs(n) if name in inits and name not in produced)
        for name in sorted(used):
            if name in self.replaced_initializers:
                graph.initializer.append(onnx.numpy_helper.from_array(self.replaced_initializers[name], name))
                continue
            graph.initializer.append(ir.serde.serialize_tensor(inits[name].const_value))
            graph.initializer[-1].name = name
        feed = self.cache[0]
        for name in self._needs(segment, produced):
            arr = feed[name]
            graph.input.append(onnx.helper.make_tensor_value_info(
                name, onnx.helper.np_dtype_to_tensor_dtype(arr.dtype), [None] * arr.ndim))
        graph.output.extend(onnx.ValueInfoProto(name=name) for name in fetch)
        opsets = [onnx.helper.make_opsetid(d, v) for d, v in self.model.opset_imports.items()]
        proto = onnx.helper.make_model(graph, opset_imports=opsets, ir_version=self.model.ir_version)
        proto.functions.extend(ir.serde.serialize_function(f) for f in self.model.functions.values())
        return cpu_session(proto)


def _tap_scan(proto, taps: list[tuple[str, str]]) -> None:
    """The Scan ``proto`` with each body value of ``taps`` as an extra scan output (one slice per
    iteration, stacked on axis 0), named as ``taps`` says."""
    import onnx

    body = next(a for a in proto.attribute if a.name == "body").g
    for value, out in taps:
        copy = f"{out}__body"
        body.node.append(onnx.helper.make_node("Identity", [value], [copy]))
        body.output.append(onnx.ValueInfoProto(name=copy))
        proto.output.append(out)
    for attr in proto.attribute:
        if attr.name in ("scan_output_axes", "scan_output_directions"):
            attr.ints.extend([0] * len(taps))


def segment_depths(model: ir.Model, calibrated: set[int]) -> dict[str, int]:
    """Value name → the largest number of ``calibrated`` nodes on any path from the inputs to it."""
    depth: dict[str, int] = {}
    for n in model.graph:
        d = max((depth.get(name, 0) for name in _reads(n)), default=0)
        for v in n.outputs:
            depth[v.name] = d + (id(n) in calibrated)
    return depth


def _choose(p: Precision, w: np.ndarray, h: np.ndarray) -> Blocks:
    if p.int4_method() == "gptq":
        return gptq_blocks(w, h, p.block_size, p.symmetric)
    return awq_clip_blocks(w, h, p.block_size, p.symmetric)


def _oriented(w: np.ndarray, transposed: bool) -> np.ndarray:
    return np.ascontiguousarray(np.swapaxes(w, -1, -2) if transposed else w, dtype=np.float32)


@dataclasses.dataclass(frozen=True)
class Choice:
    """The codes one weight (one layer of a stacked weight: ``name[layer]``) kept, and the output
    errors ``||X_held (W - W_q)||^2`` on the held-out rows behind the choice."""

    name: str
    kept: str  # the method ("gptq", "awq"), or "rtn" where it did not beat rounding or was not tried
    method_error: float | None  # None: too few held-out rows to judge the method by, so it was not run
    rounded_error: float
    reference: float  # ||X_held W||^2: what the errors are relative to


def _directions(h: np.ndarray) -> int:
    """How many directions inputs with ``h = X^T X`` span: eigenvalues above 1% of the largest."""
    import jax.numpy as jnp

    eigenvalues = np.asarray(jnp.linalg.eigvalsh(jnp.asarray(h, jnp.float32)))
    return int(np.sum(eigenvalues > 0.01 * eigenvalues.max())) if eigenvalues.max() > 0 else 0


def _chosen(p: Precision, name: str, w: np.ndarray, fit: np.ndarray, held: np.ndarray, held_rows: int,
            spanned: Callable[[], int]) -> tuple[Blocks, Choice]:
    """The method's codes from ``fit`` (``X^T X`` of the rows it may see) or round-to-nearest's,
    whichever has the smaller output error on the held-out rows (``held``, ``held_rows`` of them);
    a tie rounds, and so do held-out rows fewer than both the inputs and the directions the fitted
    rows span (``spanned()``, :func:`_directions` of ``fit``; the method is not run: so few rows
    leave directions unjudged)."""
    rounded = rtn_blocks(w, p.block_size, p.symmetric)
    rounded_error = output_error(w, held, rounded, p.block_size)
    reference = output_error(w, held, None, p.block_size)
    if held_rows < w.shape[0] and held_rows < spanned():
        return rounded, Choice(name, "rtn", None, rounded_error, reference)
    method = _choose(p, w, fit)
    method_error = output_error(w, held, method, p.block_size)
    kept = p.int4_method() if method_error < rounded_error else "rtn"
    return (method if kept != "rtn" else rounded), Choice(name, kept, method_error, rounded_error, reference)


@dataclasses.dataclass
class Calibrated:
    """The chosen blocks: ``matmuls[id(node)]`` of each main-graph matmul that kept its method's
    codes, ``stacked[site.key]`` one per layer of each calibrated stacked weight; ``rounded``: ids
    of the main-graph matmuls calibrated but left round-to-nearest; ``choices``: every weight's."""

    matmuls: dict[int, Blocks] = dataclasses.field(default_factory=dict)
    stacked: dict[object, list[Blocks]] = dataclasses.field(default_factory=dict)
    stacked_names: list[str] = dataclasses.field(default_factory=list)
    rounded: set[int] = dataclasses.field(default_factory=set)
    choices: list[Choice] = dataclasses.field(default_factory=list)


def _held_out(start: int, n: int) -> np.ndarray:
    """Which of ``n`` rows, numbered from ``start``, are held out: every :data:`HOLDOUT_EVERY`-th."""
    return (start + np.arange(n)) % HOLDOUT_EVERY == HOLDOUT_EVERY - 1


def _warn_few_rows(name: str, rows: int, K: int, widest: int) -> None:
    warnings.warn(f"int4 calibration gave {name} {rows} rows of inputs (one per position of the batches: a token of an "
                  f"LM), under {HOLDOUT_EVERY} per input feature (it has {K}): every {HOLDOUT_EVERY}th row is held out "
                  "to judge the calibrated codes by, and here too few were, fewer than the directions the inputs span, "
                  f"so weights short of them are rounded (plain int4); give at least {HOLDOUT_EVERY * widest} rows "
                  f"({HOLDOUT_EVERY} x {widest}, the widest calibrated input): more or longer batches", UserWarning,
                  stacklevel=_user_level())


def _user_level() -> int:
    """``stacklevel`` of the frame that called into jax2onnx (a pack's or the core's outermost),
    so a warning names the user's export line rather than this module."""
    import sys

    frame, level, outermost = sys._getframe(2), 2, 1
    while frame is not None:
        if frame.f_globals.get("__name__", "").startswith("jax2onnx"):
            outermost = level
        frame, level = frame.f_back, level + 1
    return outermost + 1


def calibrate(model: ir.Model, p: Precision, sites: list[MatmulSite], stacks: list[StackedSite]) -> Calibrated:
    """Codes for ``sites`` and ``stacks`` under ``p``'s method, group by group (see the module)."""
    import jax.numpy as jnp
    from jax.lax import Precision as MatmulPrecision

    HIGHEST = MatmulPrecision.HIGHEST  # sums of products in float32 on every device (a TPU defaults to bfloat16 passes)
    result = Calibrated()
    if not p.calibration or not (sites or stacks):
        return result
    runner = SegmentRunner(model, p.calibration)
    depth = segment_depths(model, {id(s.node) for s in sites} | {id(s.scan) for s in stacks})
    groups: dict[int, tuple[list[MatmulSite], list[StackedSite]]] = {}
    for s in sites:
        groups.setdefault(depth.get(s.a.name, 0), ([], []))[0].append(s)
    for s in stacks:
        d = max((depth.get(name, 0) for name in _reads(s.scan)), default=0)
        groups.setdefault(d, ([], []))[1].append(s)
    callback = _LAYER_CALLBACK.get()
    order = sorted(groups)
    reporter = current_progress()
    reporter.steps("calibrating layers", len(order))
    widest = max(s.K for s in [*sites, *stacks])
    warned = False
    for done, d in enumerate(order, start=1):
        flat, stacked = groups[d]
        # the nodes this group and the later ones still need: values only the rest would read are let go
        heads = [runner.producer[s.a.name] for k in order[done - 1:] for s in groups[k][0] if s.a.name in runner.producer]
        runner.useful = {id(n) for n in runner._segment(heads + [s.scan for k in order[done - 1:] for s in groups[k][1]],
                                                         set())}
        taps = {s.a.name: s.K for s in flat}
        scan_taps: dict[int, list[tuple[str, str]]] = {}
        tap_of: dict[int, str] = {}
        index_of: dict[str, tuple[str, int, bool]] = {}  # per-iteration tap → (its layer indices' tap, L, reverse)
        for s in stacked:
            out = f"{s.body_a.name}__calibration_{runner.index[id(s.scan)]}_{len(tap_of)}"
            scan_taps.setdefault(id(s.scan), []).append((s.body_a.name, out))
            tap_of[id(s)] = out
            taps[out] = s.K
            index = None
            if s.index is not None:  # a Loop: which layer each iteration picked, as a scan output too
                index = f"{out}__layer"
                scan_taps[id(s.scan)].append((s.index.name, index))
            index_of[out] = (index, s.layers, s.reverse)
        fit: dict[str, jnp.ndarray] = {}  # X^T X of the rows the method sees, per tap (per layer: [L, K, K])
        held: dict[str, jnp.ndarray] = {}  # ... of the held-out rows
        seen: dict[str, int] = {}  # rows per tap so far (per iteration of a stacked one): where the hold-out count is
        rows_of: dict[str, np.ndarray] = {}  # rows each weight (each layer) met
        held_of: dict[str, np.ndarray] = {}  # ... of them held out
        for outs in runner.run(list(taps) + [v[0] for v in index_of.values() if v[0]], scan_taps):
            for name, x in outs.items():
                if name not in taps:
                    continue
                x = np.asarray(x, np.float32)
                if name in index_of:
                    index, layers, reverse = index_of[name]
                    rows = x.reshape(x.shape[0], -1, taps[name])
                    picked = (np.asarray(outs[index]).reshape(-1).astype(np.int64) % layers if index is not None
                              else np.arange(x.shape[0])[::-1 if reverse else 1])
                    mask = _held_out(seen.get(name, 0), rows.shape[1])
                    seen[name] = seen.get(name, 0) + rows.shape[1]
                    per_layer = np.bincount(picked, minlength=layers)
                    count, held_count = per_layer * rows.shape[1], per_layer * int(mask.sum())

                    def hessian(part, picked=picked, layers=layers, K=taps[name]):
                        part = jnp.asarray(part)
                        per_step = jnp.einsum("trk,trl->tkl", part, part, precision=HIGHEST)
                        return jnp.zeros((layers, K, K), jnp.float32).at[picked].add(per_step)

                    pair = (hessian(rows[:, ~mask]), hessian(rows[:, mask]))
                else:
                    rows = x.reshape(-1, taps[name])
                    mask = _held_out(seen.get(name, 0), rows.shape[0])
                    seen[name] = seen.get(name, 0) + rows.shape[0]
                    count, held_count = np.asarray(rows.shape[0]), np.asarray(mask.sum())
                    pair = tuple(jnp.matmul(part.T, part, precision=HIGHEST)
                                 for part in (jnp.asarray(rows[~mask]), jnp.asarray(rows[mask])))
                for sums, h in zip((fit, held), pair, strict=True):
                    sums[name] = sums[name] + h if name in sums else h
                rows_of[name] = rows_of[name] + count if name in rows_of else count
                held_of[name] = held_of[name] + held_count if name in held_of else held_count
        short: list[tuple[str, int, int]] = []  # weights rounded for want of held-out rows: (name, rows, K)
        spans: dict[tuple[str, int], int] = {}  # (tap, layer) → _directions: one eigendecomposition per input

        def spanned(tap: str, h: np.ndarray, layer: int = 0) -> Callable[[], int]:
            return lambda: spans[tap, layer] if (tap, layer) in spans else spans.setdefault((tap, layer), _directions(h))

        for s in flat:
            blocks, choice = _chosen(p, s.name, _oriented(s.load(), s.transposed), np.asarray(fit[s.a.name]),
                                     np.asarray(held[s.a.name]), int(held_of[s.a.name]), spanned(s.a.name, fit[s.a.name]))
            result.choices.append(choice)
            if choice.method_error is None:
                short.append((s.name, int(rows_of[s.a.name]), s.K))
            if choice.kept == "rtn":
                result.rounded.add(id(s.node))  # plain int4's codes (onnxruntime's quantizer) are written
            else:
                result.matmuls[id(s.node)] = blocks
            runner.replaced[id(s.node), 1] = _oriented(dequantized(*blocks, p.block_size), s.transposed)
        for s in stacked:
            w = s.load()
            tap = tap_of[id(s)]
            h_fit, h_held = np.asarray(fit[tap]), np.asarray(held[tap])
            layers = []
            for layer in range(w.shape[0]):
                blocks, choice = _chosen(p, f"{s.name}[{layer}]", _oriented(w[layer], s.transposed), h_fit[layer],
                                         h_held[layer], int(held_of[tap][layer]), spanned(tap, h_fit[layer], layer))
                layers.append(blocks)
                result.choices.append(choice)
                if choice.method_error is None:
                    short.append((choice.name, int(rows_of[tap][layer]), s.K))
            result.stacked[s.key] = layers
            result.stacked_names.append(s.name)
            quantized = np.stack([_oriented(dequantized(*b, p.block_size), s.transposed) for b in layers])
            if s.slot is None:
                runner.replaced_initializers[s.name] = quantized
            else:
                runner.replaced[id(s.scan), s.slot] = quantized
        if short and not warned:
            _warn_few_rows(*short[0], widest)
            warned = True
        reporter.step()
        if callback is not None:
            callback(done, len(groups), [s.name for s in flat] + [s.name for s in stacked])
    return result


__all__ = ["HOLDOUT_EVERY", "Calibrated", "Choice", "MatmulSite", "SegmentRunner", "StackedSite", "calibrate",
           "checked_feed", "cpu_session", "measuring_on", "reporting_layers", "segment_depths"]

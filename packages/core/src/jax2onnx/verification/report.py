"""The export report: does the ONNX model compute what the JAX function computes, and what is in it.

    from jax2onnx import to_onnx, verify
    model = to_onnx(fn, [("B", 30)])
    report = verify(fn, model, [("B", 30)])   # two sizes per symbolic dim, random inputs
    report.print()                            # a table in the terminal (rich when installed)
    report.to_dict(); report.to_markdown()

Per output (by graph output name): the largest absolute and relative error, how many elements are
out of tolerance, and the tolerance used; per trial, the concrete input shapes. The model summary
lists the op histogram, parameter count and bytes, file size, opset, inputs/outputs with shapes, and the
export's target with the rewrites applied per rule; with ``explain=True`` also, per rewrite rule whose
pattern is in the model but a condition failed, the first such node and the condition in words
(``jax2onnx.passes.rewrite.explain_rewrites``).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir

from ..compat import x64_enabled
from ..errors import Jax2OnnxError, require_onnxruntime
from ..ir import complex_io, proto_walk
from ..passes.rewrite import REWRITES_KEY, TARGET_KEY, explain_rewrites
from ..targets import find_target, get_target
from . import greedy as greedy_check
from . import precision as precision_report
from . import reference as references
from .compare import as_onnx_value, jax_output_array, jax_reference, onnx_runner, run_onnx
from .render import print_report
from .trials import TRIAL_SIZES, random_value, spec_dtype, trial_inputs

__all__ = ["TRIAL_SIZES", "ExportReport", "VerificationError", "random_value", "summarize", "trial_inputs", "verify"]

#: (rtol, atol) by the output's element type when the caller gives none. float32 leaves room for
#: different summation orders in XLA and onnxruntime; float64 is tight.
DEFAULT_TOLERANCES = {
    "float64": (1e-7, 1e-9),
    "float32": (1e-4, 1e-5),
    "float16": (1e-2, 1e-3),
    "bfloat16": (2e-2, 1e-2),
}


# ---------------------------------------------------------------------------------------------
# The model summary


@dataclasses.dataclass
class TensorInfo:
    name: str
    dtype: str
    shape: list[str | int]
    #: the JAX dtype (complex64/complex128) of a value that travels as (real, imag) pairs on the
    #: trailing axis of ``shape`` (``jax2onnx.ir.complex_io``); None for any other
    complex: str | None = None

    def __str__(self) -> str:
        if self.complex is not None:
            return f"{self.name}: {complex_io.describe(self.complex, self.shape[:-1])}"
        return f"{self.name}: {self.dtype}[{', '.join(str(d) for d in self.shape)}]"


@dataclasses.dataclass
class ModelSummary:
    """What is in an ONNX model, read from the ModelProto (and the file, when there is one)."""

    graph_name: str
    opset: int | None
    ir_version: int
    inputs: list[TensorInfo]
    outputs: list[TensorInfo]
    op_histogram: dict[str, int]
    node_count: int
    function_count: int
    #: the model's weights: initializers of a floating type, or of the 8-and-fewer-bit integer
    #: types quantized weights are stored in (jax2onnx.precision), with at least one axis. Not
    #: parameters: int32/int64/bool initializers (shapes, axes, indices, masks) and scalars (a
    #: literal such as the 2.0 of ``x * 2.0``); the file size counts them all.
    parameter_count: int
    parameter_bytes: int
    file_bytes: int | None = None
    external_data_bytes: int | None = None
    #: the export's ``target=`` and the rewrites applied per rule (``jax2onnx.passes.rewrite``),
    #: read from the model's metadata; None/empty for a model from elsewhere
    target: str | None = None
    rewrites: dict[str, int] = dataclasses.field(default_factory=dict)
    #: ``explain=True``: per rewrite rule that did not fire where its pattern is, the first node
    #: and the condition that failed, one line each; None when not asked
    rewrite_misses: list[str] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["inputs"] = [dataclasses.asdict(t) for t in self.inputs]
        out["outputs"] = [dataclasses.asdict(t) for t in self.outputs]
        return out


def _tensor_info(vi: onnx.ValueInfoProto, complex_dtype: str | None = None) -> TensorInfo:
    tt = vi.type.tensor_type
    dtype = _dtype_name(tt.elem_type) if tt.elem_type else "?"
    dims: list[str | int] = [d.dim_param if d.dim_param else (d.dim_value if d.HasField("dim_value") else "?") for d in tt.shape.dim]
    return TensorInfo(vi.name, dtype, dims, complex_dtype)


def _dtype_name(elem_type: int) -> str:
    """numpy's name for an ONNX element type (float32, not FLOAT), as JAX users read dtypes."""
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).name
    except Exception:  # noqa: BLE001 - types numpy lacks keep ONNX's name
        return onnx.TensorProto.DataType.Name(elem_type).lower()


def _tensor_nbytes(t: onnx.TensorProto) -> int:
    """Stored bytes of an initializer, from the ONNX element type's size (onnx_ir's table: onnx
    before 1.19 maps bfloat16 to numpy float32, which would count it as 4 bytes; 4-bit types pack
    two to a byte)."""
    count = int(np.prod(t.dims)) if len(t.dims) else 1
    return int(np.ceil(count * ir.DataType(t.data_type).itemsize))


#: element types weights are stored in: floats, and the quantized (jax2onnx.precision) small ints
_WEIGHT_TYPES = frozenset({
    onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE,
    onnx.TensorProto.INT8, onnx.TensorProto.UINT8, onnx.TensorProto.INT4, onnx.TensorProto.UINT4,
})


def is_parameter(t: onnx.TensorProto) -> bool:
    """Whether an initializer counts as one of the model's parameters (:class:`ModelSummary`)."""
    return t.data_type in _WEIGHT_TYPES and len(t.dims) > 0


def bytes_by_dtype(model: onnx.ModelProto) -> dict[str, int]:
    """Initializer bytes per element type (``{"float16": 1048576, "uint8": ...}``), largest first."""
    out: collections.Counter[str] = collections.Counter()
    for t in model.graph.initializer:
        out[_dtype_name(t.data_type)] += _tensor_nbytes(t)
    return dict(out.most_common())


def summarize(model: onnx.ModelProto | str | os.PathLike[str], path: str | os.PathLike[str] | None = None, *,
              explain: bool = False) -> ModelSummary:
    """The :class:`ModelSummary` of ``model`` (a ModelProto or a file path). ``path``: the file
    the model was written to, for its size (and its ``.data`` file's). ``explain``: also why the
    rewrite rules of the model's target did not fire where their pattern is (``rewrite_misses``)."""
    if not isinstance(model, onnx.ModelProto):
        path = path or model
        model = onnx.load(os.fspath(model), load_external_data=False)
    graph = model.graph
    nodes = list(proto_walk.nodes(model))
    histogram = collections.Counter(n.op_type if not n.domain else f"{n.domain}.{n.op_type}" for n in nodes)
    params = [t for t in graph.initializer if is_parameter(t)]
    file_bytes = ext_bytes = None
    if path is not None and os.path.exists(path):
        file_bytes = os.path.getsize(path)
        locations = {
            entry.value
            for t in graph.initializer
            if t.data_location == onnx.TensorProto.EXTERNAL
            for entry in t.external_data
            if entry.key == "location"
        }
        folder = os.path.dirname(os.path.abspath(path))
        sizes = [os.path.getsize(os.path.join(folder, loc)) for loc in locations if os.path.exists(os.path.join(folder, loc))]
        ext_bytes = sum(sizes) if locations else None
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    meta = {p.key: p.value for p in model.metadata_props}
    try:
        rewrites = {str(k): int(v) for k, v in json.loads(meta.get(REWRITES_KEY, "{}")).items()}
    except (ValueError, TypeError, AttributeError):  # metadata written by someone else: not ours to read
        rewrites = {}
    complex_in, complex_out = complex_io.read(meta)
    return ModelSummary(
        graph_name=graph.name,
        opset=opset,
        ir_version=model.ir_version,
        inputs=[_tensor_info(v, complex_in.get(i)) for i, v in enumerate(graph.input)],
        outputs=[_tensor_info(v, complex_out.get(i)) for i, v in enumerate(graph.output)],
        op_histogram=dict(sorted(histogram.items(), key=lambda kv: (-kv[1], kv[0]))),
        node_count=len(nodes),
        function_count=len(model.functions),
        parameter_count=sum(int(np.prod(t.dims)) if len(t.dims) else 1 for t in params),
        parameter_bytes=sum(_tensor_nbytes(t) for t in params),
        file_bytes=file_bytes,
        external_data_bytes=ext_bytes,
        target=meta.get(TARGET_KEY),
        rewrites=rewrites,
        rewrite_misses=_rewrite_misses(model, meta.get(TARGET_KEY), path) if explain else None,
    )


def _rewrite_misses(model: onnx.ModelProto, target: str | None, path: str | os.PathLike[str] | None) -> list[str]:
    """The near misses of the rewrite rules of ``target`` (the one the model records) on ``model``."""
    try:
        if path is not None and any(t.data_location == onnx.TensorProto.EXTERNAL for t in model.graph.initializer):
            # the rules read constants: the weights beside the file
            model = onnx.load(os.fspath(path))
        return [str(found) for found in explain_rewrites(model, get_target(target) if target else None)]
    except Exception as exc:  # noqa: BLE001 - an explanation that cannot be made never fails the report
        return [f"(could not explain: {type(exc).__name__}: {exc})"]


# ---------------------------------------------------------------------------------------------
# Numerical checks


@dataclasses.dataclass
class OutputCheck:
    """One output of one trial compared with JAX."""

    name: str
    shape: list[int]
    dtype: str
    max_abs_error: float
    max_rel_error: float
    mismatches: int
    size: int
    rtol: float
    atol: float
    problem: str | None = None  # a shape/dtype/count mismatch that makes numbers meaningless
    #: a reduced-precision export (jax2onnx.precision) is judged by cosine, its mismatches only shown
    cosine: float | None = None
    min_cosine: float | None = None

    @property
    def ok(self) -> bool:
        if self.min_cosine is not None and self.problem is None:
            return self.cosine is not None and self.cosine >= self.min_cosine
        return self.problem is None and self.mismatches == 0


@dataclasses.dataclass
class Trial:
    """One run on random inputs: the concrete input shapes and each output's check."""

    inputs: dict[str, list[int]]
    outputs: list[OutputCheck]

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outputs)


@dataclasses.dataclass
class ExportReport:
    """The report :func:`verify` returns: truthy when every output of every trial is within tolerance."""

    trials: list[Trial]
    summary: ModelSummary
    #: float16/bfloat16/int8/int4 exports: bytes by dtype and the outputs' distance from float32
    precision: Any = None  # jax2onnx.verification.precision.PrecisionSection
    #: where the JAX reference ran (platform, device kind) and its float32 matmul precision
    reference: references.ReferenceInfo | None = None
    #: a mismatch against the accelerator's default numbers, compared once more at highest precision
    recheck: references.PrecisionRecheck | None = None

    @property
    def ok(self) -> bool:
        return bool(self.trials) and all(t.ok for t in self.trials) and (self.precision is None or self.precision.ok)

    def __bool__(self) -> bool:
        return self.ok

    # -- views ------------------------------------------------------------------------------------
    def worst(self) -> list[OutputCheck]:
        """Per output name, the trial with the largest absolute error (or a problem)."""
        best: dict[str, OutputCheck] = {}
        for trial in self.trials:
            for o in trial.outputs:
                cur = best.get(o.name)
                if cur is None or (o.problem and not cur.problem) or (not cur.problem and o.max_abs_error > cur.max_abs_error):
                    best[o.name] = o
        return list(best.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "trials": [
                {"inputs": t.inputs, "ok": t.ok, "outputs": [{**dataclasses.asdict(o), "ok": o.ok} for o in t.outputs]}
                for t in self.trials
            ],
            "summary": self.summary.to_dict(),
            **({"precision": self.precision.to_dict()} if self.precision is not None else {}),
            **({"reference": self.reference.to_dict()} if self.reference is not None else {}),
            **({"recheck": self.recheck.to_dict()} if self.recheck is not None else {}),
        }

    def _output_rows(self) -> list[list[str]]:
        rows = []
        for o in self.worst():
            status = "ok" if o.ok else ("FAIL: " + o.problem if o.problem else "FAIL")
            rows.append([
                o.name, f"{o.dtype}[{', '.join(map(str, o.shape))}]", f"{o.max_abs_error:.3g}", f"{o.max_rel_error:.3g}",
                f"{o.mismatches}/{o.size}", f"{o.rtol:g}/{o.atol:g}", status,
            ])
        return rows

    def _summary_rows(self) -> list[list[str]]:
        s = self.summary
        rows = [
            ["graph", f"{s.graph_name} (opset {s.opset}, IR {s.ir_version})"],
            ["inputs", "; ".join(map(str, s.inputs))],
            ["outputs", "; ".join(map(str, s.outputs))],
            ["nodes", f"{s.node_count} ({s.function_count} functions)" if s.function_count else str(s.node_count)],
            ["ops", ", ".join(f"{op} {n}" for op, n in s.op_histogram.items())],
            ["parameters", f"{s.parameter_count:,} ({_human_bytes(s.parameter_bytes)})"],
        ]
        if s.target is not None:
            rows.append(["target", s.target])
            rows.append(["rewrites", ", ".join(f"{rule} {n}" for rule, n in s.rewrites.items()) or "none"])
        if s.rewrite_misses is not None:
            rows.append(["rewrites missed", "; ".join(s.rewrite_misses) or "none"])
        if s.file_bytes is not None:
            size = _human_bytes(s.file_bytes)
            if s.external_data_bytes is not None:
                size += f" + {_human_bytes(s.external_data_bytes)} external data"
            rows.append(["file", size])
        if self.precision is not None:
            rows += self.precision.rows(_human_bytes)
        if self.reference is not None:
            rows.append(["reference", str(self.reference)])
        if self.recheck is not None:
            rows.append(["at highest precision", self.recheck.explanation()])
        return rows

    def inputs_tried(self) -> str:
        """The concrete input shapes of each trial, ``x[2, 4]; x[5, 4]``."""
        parts = []
        for t in self.trials:
            parts.append(", ".join(f"{n}[{', '.join(map(str, s))}]" for n, s in t.inputs.items()) or "(no inputs)")
        return "; ".join(parts)

    _OUTPUT_HEADER = ["output", "shape", "max abs err", "max rel err", "mismatches", "rtol/atol", "status"]

    def to_markdown(self) -> str:
        lines = [f"**Verification: {'match' if self.ok else 'MISMATCH'}** (inputs tried: {self.inputs_tried()})", ""]
        lines.append("| " + " | ".join(self._OUTPUT_HEADER) + " |")
        lines.append("|" + "---|" * len(self._OUTPUT_HEADER))
        lines += ["| " + " | ".join(r) + " |" for r in self._output_rows()]
        lines += ["", "| model | |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in self._summary_rows()]
        return "\n".join(lines) + "\n"

    def __str__(self) -> str:
        rows = [self._OUTPUT_HEADER, *self._output_rows()]
        widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
        lines = [f"verification: {'match' if self.ok else 'MISMATCH'} (inputs tried: {self.inputs_tried()})"]
        lines += ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        lines += [f"{k}: {v}" for k, v in self._summary_rows()]
        return "\n".join(lines)

    def print(self, console: Any = None) -> None:
        """Print the report: rich tables in a terminal, wrapped only between words at any width;
        plain text (``str(report)``) when the output is piped or rich is not installed
        (:mod:`jax2onnx.verification.render`)."""
        print_report(self, console)

    def failures(self) -> str:
        """One line per output that failed, with its error figures (empty when the report is ok)."""
        lines = []
        for o in self.worst():
            if o.ok:
                continue
            what = f"output '{o.name}' ({o.dtype}[{', '.join(map(str, o.shape))}])"
            if o.problem:
                lines.append(f"{what}: {o.problem}")
            elif o.min_cosine is not None:
                lines.append(f"{what}: cosine {o.cosine:.6f} with the float32 function, under the floor {o.min_cosine:g} "
                             f"of this precision (max abs error {o.max_abs_error:.3g})")
            else:
                lines.append(
                    f"{what}: max abs error {o.max_abs_error:.3g}, max rel error {o.max_rel_error:.3g}, "
                    f"{o.mismatches}/{o.size} elements outside rtol={o.rtol:g}, atol={o.atol:g}"
                )
        greedy = self.precision.greedy if self.precision is not None else None
        if greedy is not None and not greedy.ok:
            lines.append(f"output '{greedy.output}': {greedy.agreement:.1%} of {greedy.tokens} greedy tokens equal the float32 "
                         f"function's, under the floor {greedy.min_agreement:.0%}")
        if not self.trials:
            lines.append("no trial ran")
        return "\n".join(lines)


class VerificationError(Jax2OnnxError):
    """``to_onnx(..., verify=True)``: the exported model does not compute what the function does.

    ``report`` is the full :class:`ExportReport` (``report.print()`` shows every figure).
    """

    def __init__(self, message: str, report: ExportReport):
        super().__init__(message)
        self.report = report


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"  # pragma: no cover


# ---------------------------------------------------------------------------------------------
# verify


def _compare(name: str, expected: np.ndarray, got: np.ndarray, rtol: float | None, atol: float | None,
             reference: str = references.HIGHEST, platform: str | None = None) -> OutputCheck:

    e, g = as_onnx_value(expected), np.asarray(got)
    dtype_name = np.dtype(expected.dtype).name
    part = "float32" if dtype_name == "complex64" else "float64" if dtype_name == "complex128" else dtype_name
    default = references.tolerance(reference, part, DEFAULT_TOLERANCES.get(part, (0.0, 0.0)), e, platform)
    rt = default[0] if rtol is None else rtol
    at = default[1] if atol is None else atol
    check = OutputCheck(name, list(expected.shape), dtype_name, 0.0, 0.0, 0, int(e.size), rt, at)
    if e.shape != g.shape:
        check.problem = f"shape {list(g.shape)} where JAX has {list(e.shape)}"
        return check
    if e.dtype != g.dtype:
        check.problem = f"dtype {g.dtype} where JAX has {e.dtype}"
        return check
    if e.size == 0:
        return check
    if e.dtype == bool:
        bad = e != g
        check.max_abs_error = float(bad.any())
        check.max_rel_error = check.max_abs_error
        check.mismatches = int(bad.sum())
        return check
    ef, gf = e.astype(np.float64), g.astype(np.float64)
    same = (ef == gf) | (np.isnan(ef) & np.isnan(gf))
    diff = np.where(same, 0.0, np.abs(ef - gf))
    diff = np.where(np.isnan(diff), np.inf, diff)  # a NaN on one side only is an infinite error
    # Relative to the reference, floored at atol so values near zero do not blow it up.
    rel = diff / np.maximum(np.abs(np.nan_to_num(ef)), max(at, np.finfo(np.float64).tiny))
    check.max_abs_error = float(diff.max())
    check.max_rel_error = float(rel.max())
    check.mismatches = int(np.sum(diff > at + rt * np.abs(np.nan_to_num(ef))))
    return check


def _typed_params(model: onnx.ModelProto, n_args: int, params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``input_params`` values as the graph's runtime inputs take them: a Python ``0.5`` given for a
    float32 input is a float32 array (onnxruntime rejects float64 there), and JAX computes with the
    very same value."""
    if not params:
        return None
    graph_inputs = list(model.graph.input)[n_args:]
    out = {}
    for i, (name, value) in enumerate(params.items()):
        arr = np.asarray(value)
        elem = graph_inputs[i].type.tensor_type.elem_type if i < len(graph_inputs) else 0
        if elem and arr.dtype.kind in "biuf":
            try:
                arr = arr.astype(onnx.helper.tensor_dtype_to_np_dtype(elem))
            except Exception:  # noqa: BLE001 - a type numpy lacks: pass the value as given
                pass
        out[name] = arr
    return out


def verify(
    fn: Callable[..., Any],
    model: onnx.ModelProto | str | os.PathLike[str],
    inputs: Sequence[Any],
    input_params: Mapping[str, Any] | None = None,
    *,
    rtol: float | None = None,
    atol: float | None = None,
    enable_double_precision: bool | None = None,
    sizes: Sequence[int] = TRIAL_SIZES,
    seed: int = 0,
    path: str | os.PathLike[str] | None = None,
    greedy: bool | str | int | greedy_check.GreedyCheck | None = None,
    reference: str = references.HIGHEST,
    explain: bool = False,
) -> ExportReport:
    """Run ``fn`` in JAX and ``model`` in onnxruntime side by side and report on the export.

    ``inputs`` are the specs given to ``to_onnx`` (shape tuples, ``jax.ShapeDtypeStruct``s; random
    values, two sizes per symbolic dim) or concrete arrays (used as given, one trial).
    ``input_params`` are passed as keyword arguments to ``fn`` and as the graph's runtime inputs.
    ``rtol``/``atol`` default by output dtype (:data:`DEFAULT_TOLERANCES`). Needs onnxruntime
    (``pip install 'jax2onnx-core[runtime]'``). Returns an :class:`ExportReport`.

    ``greedy``: the model is a causal LM (one integer ``[batch, sequence]`` input, logits
    ``[batch, sequence, vocabulary]``): decode greedily through both and put the share of equal
    tokens in the precision section, which fails under 90% (:mod:`jax2onnx.verification.greedy`;
    ``True``, the logits output's name or index, or a ``GreedyCheck``).

    ``reference``: ``"highest"`` (default) computes the JAX side at highest matmul precision, so
    float32 is float32 on a TPU or GPU too; ``"accelerator-default"`` compares with the device's
    default numbers (bfloat16 passes on a TPU) within looser float32 tolerances
    (:data:`jax2onnx.verification.reference.ACCELERATOR_TOLERANCES`) and, on a mismatch, computes
    the reference once more at highest precision: ``report.recheck`` then says whether the
    difference was only precision. ``report.reference`` names the device and precision JAX ran at.

    ``explain``: the summary also says why rewrite rules did not fire where their pattern is
    (:func:`summarize`'s ``explain``).
    """
    import jax

    reference = references.check_reference(reference)
    require_onnxruntime("verify")
    runnable: Any = model
    if not isinstance(model, onnx.ModelProto):
        path = path or model
        runnable = os.fspath(model)  # onnxruntime memory-maps external data found beside the file
        model = onnx.load(runnable, load_external_data=False)
    summary = summarize(model, path, explain=explain)
    double = bool(enable_double_precision)
    if enable_double_precision is None:
        double = any(spec_dtype(s, False) == np.float64 for s in inputs if not isinstance(s, (tuple, list)))
    names = [o.name for o in model.graph.output]
    input_params = _typed_params(model, len(inputs), input_params)

    recorded = precision_report.recorded_precision(model)
    judged = precision_report.judged_as(model, recorded[0]) if recorded is not None else None
    if judged is not None and rtol is None and atol is None:
        rtol, atol = precision_report.TOLERANCES[judged]
    runner = find_target(summary.target)  # verification runs on the providers of the target it was made for
    distances: dict[str, Any] = {}
    trials: list[Trial] = []
    ran: list[tuple[list[np.ndarray], list[Any]]] = []  # (inputs, ONNX outputs) per trial, for the recheck
    info = None
    for arrays in trial_inputs(inputs, double=double, sizes=sizes, seed=seed):
        with x64_enabled(double):
            outputs = jax_reference(fn, arrays, input_params, reference=reference)
            info = info or references.reference_info(outputs, reference)
            expected = [jax_output_array(e) for e in jax.tree_util.tree_leaves(outputs)]
        got = run_onnx(runnable, arrays, input_params, target=runner)
        if reference == references.ACCELERATOR_DEFAULT:
            ran.append((arrays, got))
        in_names = [i.name for i in model.graph.input]
        shown = {n: list(a.shape) for n, a in zip(in_names, arrays)}
        checks = []
        if len(got) != len(expected):
            checks.append(OutputCheck("(outputs)", [], "", float("inf"), float("inf"), 0, 0, 0.0, 0.0,
                                      problem=f"{len(got)} ONNX outputs where JAX returns {len(expected)}"))
        for i, (e, g) in enumerate(zip(expected, got)):
            check = _compare(names[i] if i < len(names) else f"output {i}", e, g, rtol, atol, reference,
                             info.platform if info is not None else None)
            if recorded is not None and check.problem is None and np.dtype(e.dtype).kind == "f":
                check.cosine = precision_report.cosine(e, g)
                check.min_cosine = precision_report.MIN_COSINE[judged]
                precision_report.merge(distances, check.name, e, g, judged)
            checks.append(check)
        trials.append(Trial(shown, checks))
    section = None
    check = greedy_check.as_check(greedy)
    if recorded is not None or check is not None:
        kind, detail = recorded if recorded is not None else ("float32", "float32")
        section = precision_report.PrecisionSection(kind, detail, bytes_by_dtype(model), list(distances.values()))
    if check is not None and section is not None:
        with x64_enabled(double), references.precision_scope(reference):
            section.greedy = greedy_check.agreement(check, model, inputs,
                                                    greedy_check.jitted_reference(fn, input_params),
                                                    onnx_runner(runnable, input_params, runner), seed=seed)
    report = ExportReport(trials, summary, section, reference=info)
    if not report.ok and ran and recorded is None:
        report.recheck = _recheck_at_highest(fn, ran, names, input_params, rtol, atol, double)
    return report


def _recheck_at_highest(fn: Callable[..., Any], ran: Sequence[tuple[list[np.ndarray], list[Any]]], names: Sequence[str],
                        input_params: Mapping[str, Any] | None, rtol: float | None, atol: float | None,
                        double: bool) -> references.PrecisionRecheck:
    """The same ONNX outputs against JAX at highest precision, with float32's own tolerances:
    matching there means the failed comparison measured the accelerator's matmul precision."""
    import jax

    ok, errors, info = True, {}, None
    for arrays, got in ran:
        with x64_enabled(double):
            outputs = jax_reference(fn, arrays, input_params, reference=references.HIGHEST)
            info = info or references.reference_info(outputs, references.HIGHEST)
            expected = [np.asarray(e) for e in jax.tree_util.tree_leaves(outputs)]
        ok = ok and len(expected) == len(got)
        for i, (e, g) in enumerate(zip(expected, got)):
            check = _compare(names[i] if i < len(names) else f"output {i}", e, g, rtol, atol,
                             platform=info.platform)
            ok = ok and check.ok
            errors[check.name] = max(errors.get(check.name, 0.0), check.max_abs_error)
    assert info is not None  # ran holds at least one trial
    return references.PrecisionRecheck(ok, info, errors)

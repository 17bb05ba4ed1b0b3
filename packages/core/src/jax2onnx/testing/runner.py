"""Expand a :class:`Testcase` into variants and check one variant end to end."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np
import onnx

from ..compat import is_symbolic_dim, x64_enabled
from ..errors import Jax2OnnxError
from ..export.program import ExportProgram
from ..export.specs import parse_inputs
from ..ir.legalize import decomposed_ops
from ..ir.opsets import op_since
from ..ir.proto_walk import nodes
from ..verification import trials
from ..verification.compare import compare, jax_expected, onnx_runner
from .references import reference_key, shared_reference
from .testcase import Testcase

#: A static variant's size for every symbol (``Testcase.static_sizes`` aside): one of DYNAMIC_SIZES,
#: so its inputs are the symbolic variant's trial at that size and JAX's outputs on them are computed
#: once for both (:mod:`.references`).
DEFAULT_STATIC_SIZE = 5
#: Every symbolic variant is run at two sizes per symbol, so a graph that baked a size in fails:
#: the sizes ``jax2onnx.verify`` tries (one engine, :mod:`jax2onnx.verification.trials`).
DYNAMIC_SIZES = trials.TRIAL_SIZES


@dataclasses.dataclass(frozen=True)
class Variant:
    """One way a testcase is checked: static or symbolic dims, float32 or float64, and the opset
    it is exported at (``None``: ``to_onnx``'s default).

    ``check`` callables receive it (``check(model, variant)``), so a check can say what it expects
    of, say, the float64 export (where onnxruntime lacks a double kernel and a decomposition is
    taken instead of the fused op).
    """

    case: Testcase
    symbolic: bool
    double: bool
    pack: str = ""
    component: str = ""
    opset: int | None = None
    #: opsets it is exported at too, after ``opset``, in the same test (``--jax2onnx-opset=default,17,13``):
    #: JAX's side of the comparison, most of a variant's time, is computed once for all of them
    more_opsets: tuple[int | None, ...] = ()

    @property
    def id(self) -> str:
        suffix = f"_opset{self.opset}" if self.opset is not None else ""
        return self.case.name + ("_dynamic" if self.symbolic else "") + ("_f64" if self.double else "") + suffix

    @property
    def expects_unavailable(self) -> bool:
        """The testcase needs a newer opset than this variant's: its export must fail saying so."""
        return self.opset is not None and self.case.min_opset is not None and self.opset < self.case.min_opset

    @property
    def fused_ops_unavailable(self) -> list[str]:
        """The expected ops that do not exist at this variant's opset (Gelu before 20, Attention
        before 23, ...): the export takes the library's own body instead, so the structure the
        testcase describes (expected/forbidden ops, node budget) is the fused form's and is not
        checked; checker, onnxruntime and the JAX comparison still are."""
        if self.opset is None:
            return []

        return [o for o in self.expected_ops if (op_since(o) or 0) > self.opset]

    @property
    def float_dtype(self) -> np.dtype:
        """The floating dtype of this variant's float inputs."""
        return np.dtype(np.float64 if self.double else np.float32)

    @property
    def expected_ops(self) -> Sequence[str]:
        if self.double and self.case.expected_ops_f64 is not None:
            return self.case.expected_ops_f64
        return self.case.expected_ops


@dataclasses.dataclass
class CaseResult:
    model: onnx.ModelProto
    max_abs_diff: list[float]
    node_count: int


@dataclasses.dataclass
class VariantInputs:
    """What a variant exports with (``specs``) and the concrete inputs it is compared on (``runs``:
    one list of arrays per size assignment; symbolic variants run at two sizes per symbol)."""

    specs: list[Any]
    runs: list[list[np.ndarray]]
    params: dict[str, Any]


def _has_symbols(specs: Sequence[Any]) -> bool:
    for s in specs:
        shape = s if isinstance(s, (tuple, list)) else getattr(s, "shape", ())
        if any(isinstance(d, str) or is_symbolic_dim(d) for d in shape):
            return True
    return False


def variants_of(case: Testcase, pack: str = "", component: str = "", opset: int | None = None) -> Iterator[Variant]:
    """The variants of ``case``; ``opset`` exports every one at that opset instead of the default."""
    symbolic = _has_symbols(case.input_shapes) and case.input_values is None
    precisions = [False, True] if case.run_f64 else [False]
    for double in precisions:
        if case.run_static or not symbolic:
            yield Variant(case, False, double, pack, component, opset)
        if symbolic:
            yield Variant(case, True, double, pack, component, opset)


def _with_static_sizes(specs: Sequence[Any], sizes: dict[str, int]) -> list[Any]:
    out = []
    for s in specs:
        if isinstance(s, (tuple, list)):
            out.append(trials.concrete_shape(s, sizes))
        elif isinstance(s, jax.ShapeDtypeStruct):
            out.append(jax.ShapeDtypeStruct(trials.concrete_shape(s.shape, sizes), s.dtype))
        else:
            out.append(s)
    return out


def op_types(model: onnx.ModelProto) -> set[str]:
    """Every op type in the model: main graph, subgraphs, function bodies."""

    return {n.op_type for n in nodes(model)}


def model_opset(model: onnx.ModelProto) -> int:
    """The default-domain opset a model is stamped with."""
    return next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))


def unavailable_ops(model: onnx.ModelProto, ops: Sequence[str]) -> list[str]:
    """Those of ``ops`` that do not exist at ``model``'s opset (Gelu before 20, Attention before
    23, ...) or that the export decomposed there (ScatterND's min/max before 18, a dilated
    AveragePool before 19): a check expecting them must accept their decomposition instead."""

    opset = model_opset(model)
    decomposed = decomposed_ops(model)
    return [o for o in ops if (op_since(o) or 0) > opset or o in decomposed]


def run_variant(variant: Variant) -> CaseResult:
    """Export, check with ``onnx.checker`` (full_check), run in onnxruntime, compare with JAX; then
    the same at each of ``variant.more_opsets`` (the result returned is the first opset's). The
    opsets share the testcase's function, its inputs, the trace (``ExportProgram.with_options``)
    and JAX's outputs: only what the opset changes runs again.

    Raises AssertionError describing the first failure (its variant id names the opset).
    """
    case = variant.case
    first = dataclasses.replace(variant, more_opsets=())
    with x64_enabled(variant.double):
        fn = case.build()
        inputs = variant_inputs(first, fn)
        first_program: ExportProgram | None = None  # its trace serves the other opsets
        references: dict[int, Any] = {}
        result = None
        for at in [first, *(dataclasses.replace(variant, opset=o, more_opsets=()) for o in variant.more_opsets)]:
            if at.expects_unavailable:
                outcome = _check_unavailable(at, fn, inputs)
            else:
                program = _program(at, fn, inputs, first_program)
                first_program = first_program or program
                model = export_and_check_structure(at, fn, inputs, program)
                diffs = compare_with_jax(at, fn, model, inputs, references)
                if case.check is not None:
                    case.check(model, at)
                outcome = CaseResult(model, diffs, len(model.graph.node))
            if result is None:
                result = outcome
    return result


def _check_unavailable(variant: Variant, fn: Any, inputs: VariantInputs) -> CaseResult:
    """Below the testcase's ``min_opset`` the export must fail with an error naming the opset."""

    try:
        _program(variant, fn, inputs).write()
    except Jax2OnnxError as exc:
        assert f"opset {variant.opset}" in str(exc) or f"opset={variant.opset}" in str(exc), (
            f"{variant.id}: the error for opset {variant.opset} < min_opset {variant.case.min_opset} does not name the opset: {exc}")
        return CaseResult(onnx.ModelProto(), [], 0)
    raise AssertionError(
        f"{variant.id}: min_opset={variant.case.min_opset} says opset {variant.opset} cannot express this testcase, "
        "but the export succeeded: lower min_opset (or drop it) so the variant is checked against JAX")


def _program(variant: Variant, fn: Any, inputs: VariantInputs, first: ExportProgram | None = None) -> ExportProgram:
    """The variant's export as ``to_onnx`` would run it (its keywords); from ``first``'s trace
    when given (the same function and inputs at another opset)."""
    case = variant.case
    kwargs: dict[str, Any] = {"input_params": dict(case.input_params) or None,
                              "enable_double_precision": variant.double, "model_name": case.name, "target": case.target}
    if variant.opset is not None:
        kwargs["opset"] = variant.opset
    if first is not None:
        return first.with_options(**{k: v for k, v in kwargs.items() if k not in ExportProgram.TRACE_OPTIONS})
    return ExportProgram(fn, inputs.specs, **kwargs)


def variant_inputs(variant: Variant, fn: Any) -> VariantInputs:
    """The specs to export with and the concrete inputs to compare on. Dtypes are the ones
    ``to_onnx`` declares for the specs (core's own spec parsing decides, not a copy of it)."""
    case = variant.case
    double = variant.double
    params = {k: _param_value(v, double) for k, v in case.input_params.items()}
    if case.input_values is not None:
        # JAX itself narrows 64-bit values without x64 (int64 -> int32); feed what it traces.
        values = [np.asarray(v) for v in case.input_values]
        dtypes = [a.dtype for a in parse_inputs(fn, values, case.input_params or None, double).args]
        values = [v.astype(d) for v, d in zip(values, dtypes)]
        return VariantInputs([jax.ShapeDtypeStruct(v.shape, v.dtype) for v in values], [values], params)
    names = trials.symbols(case.input_shapes)
    if variant.symbolic:
        specs = list(case.input_shapes)
        size_sets = trials.size_assignments(names, DYNAMIC_SIZES)
    else:
        sizes = {s: case.static_sizes.get(s, DEFAULT_STATIC_SIZE) for s in names}
        specs = _with_static_sizes(case.input_shapes, sizes)
        # the symbolic variant's draws, of which this variant takes the trial at its sizes: the same
        # arrays, so the two share JAX's outputs on them
        size_sets = trials.size_assignments(names, DYNAMIC_SIZES)
        if sizes not in size_sets:
            size_sets = [sizes]
    dtypes = [np.dtype(a.dtype) for a in parse_inputs(fn, specs, case.input_params or None, double).args]
    runs = trials.trial_arrays(case.input_shapes, dtypes, size_sets, seed=0,
                               generator=case.input_generator or trials.default_generator)
    if not variant.symbolic:
        runs = [runs[size_sets.index(sizes)]]
    return VariantInputs(specs, runs, params)


def export_and_check_structure(variant: Variant, fn: Any, inputs: VariantInputs,
                               program: ExportProgram | None = None) -> onnx.ModelProto:
    """Export (``program``, else the variant's own), run ``onnx.checker`` (full_check) and check the
    graph against the testcase's expected/forbidden ops, node budget and (float64) output dtypes."""

    case = variant.case
    model = (program or _program(variant, fn, inputs)).model_proto
    onnx.checker.check_model(model, full_check=True)
    if variant.opset is not None:
        stamped = model_opset(model)
        assert stamped == variant.opset, f"{variant.id}: exported at opset {variant.opset}, stamped {stamped}"
    ops = op_types(model)
    # An expected op the opset lacks means the fused form cannot be built: the library's own body
    # is exported, and the rest of the fused form's structure (the Split of a fused Q|K|V, the
    # forbidden ReduceMean, the node budget) describes a graph that is not this one.
    decomposed = variant.fused_ops_unavailable or unavailable_ops(model, variant.expected_ops)
    missing = [o for o in variant.expected_ops if o not in ops] if not decomposed else []
    assert not missing, f"{variant.id}: expected ONNX ops {missing} not in graph (has {sorted(ops)})"
    present = [o for o in case.forbidden_ops if o in ops] if not decomposed else []
    assert not present, f"{variant.id}: ops {present} should have been fused away (graph has {sorted(ops)})"
    # The node budget counts the newest form: an op rewritten for an older opset (Shape's start/end
    # as a Slice before 15, LayerNormalization's definition before 17, ...) adds nodes.
    if case.max_nodes is not None and not decomposed and not decomposed_ops(model):
        assert len(model.graph.node) <= case.max_nodes, f"{variant.id}: {len(model.graph.node)} nodes > budget {case.max_nodes}"
    if variant.double:
        for out in model.graph.output:
            et = out.type.tensor_type.elem_type
            assert et != onnx.TensorProto.FLOAT, f"{variant.id}: output {out.name} is float32 under enable_double_precision"
    return model


def compare_with_jax(variant: Variant, fn: Any, model: onnx.ModelProto, inputs: VariantInputs,
                     references: dict[int, Any] | None = None) -> list[float]:
    """Run every input set in onnxruntime and JAX; the largest absolute difference per output.
    ``references``: JAX's outputs by input set, filled as they are computed and reused when
    present (the opsets of one variant run on the same inputs: JAX's jit of the testcase was most
    of a variant's time), or found in :mod:`.references` where another variant of the testcase
    compared on the same inputs (the static variant and the symbolic one)."""
    case = variant.case
    rtol, atol = (case.rtol_f64, case.atol_f64) if variant.double else (case.rtol, case.atol)
    references = {} if references is None else references
    # One session for every input set (a symbolic variant runs two): starting it is most of what
    # onnxruntime spends on a testcase, seconds for the large ones (jax.random's samplers).
    # One onnxruntime thread: a testcase's model is tiny and run once per set, and the default
    # pool (one spinning thread per core) cost more CPU to start than the run itself.
    run = onnx_runner(model, inputs.params or None, case.target, threads=1)
    diffs: list[float] = []
    for i, vals in enumerate(inputs.runs):
        if i not in references:
            arrays = [np.asarray(v) for v in vals]
            references[i] = shared_reference(
                reference_key(variant, arrays, inputs.params),
                lambda: jax_expected(fn, arrays, inputs.params or None, double=variant.double, jit=case.reference_jit),
                variant)
        expected = references[i]
        cmp = compare(fn, model, vals, inputs.params or None, rtol=rtol, atol=atol, enable_double_precision=variant.double,
                       jit=case.reference_jit, expected=expected, target=case.target, runner=run)
        assert cmp.ok, f"{variant.id} with input shapes {[v.shape for v in vals]}: {cmp}"
        diffs = [max(a, b) for a, b in zip(diffs, cmp.max_abs_diff)] if diffs else list(cmp.max_abs_diff)
    return diffs




def _param_value(v: Any, double: bool) -> Any:
    arr = np.asarray(v)
    if arr.dtype == np.float64 and not double:
        return arr.astype(np.float32)
    if arr.dtype == np.float32 and double:
        return arr.astype(np.float64)
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return np.asarray(v, dtype=np.int64 if double else np.int32)
    if isinstance(v, float):
        return np.asarray(v, dtype=np.float64 if double else np.float32)
    return arr

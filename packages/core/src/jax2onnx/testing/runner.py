"""Expand a :class:`Testcase` into variants and check one variant end to end."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator, Sequence
from typing import Any

import jax
import numpy as np
import onnx

from .. import compat
from ..conversion import to_onnx
from ..verification import allclose
from .testcase import Testcase

DEFAULT_STATIC_SIZE = 3
#: Every symbolic variant is run at two sizes per symbol, so a graph that baked a size in fails.
DYNAMIC_SIZES = (2, 5)


@dataclasses.dataclass(frozen=True)
class Variant:
    case: Testcase
    symbolic: bool
    double: bool
    pack: str = ""
    component: str = ""

    @property
    def id(self) -> str:
        return self.case.name + ("_dynamic" if self.symbolic else "") + ("_f64" if self.double else "")


@dataclasses.dataclass
class CaseResult:
    model: onnx.ModelProto
    max_abs_diff: list[float]
    node_count: int


def _has_symbols(specs: Sequence[Any]) -> bool:
    for s in specs:
        shape = s if isinstance(s, (tuple, list)) else getattr(s, "shape", ())
        if any(isinstance(d, str) or compat.is_symbolic_dim(d) for d in shape):
            return True
    return False


def variants_of(case: Testcase, pack: str = "", component: str = "") -> Iterator[Variant]:
    symbolic = _has_symbols(case.input_shapes) and case.input_values is None
    precisions = [False, True] if case.run_f64 else [False]
    for double in precisions:
        if case.run_static or not symbolic:
            yield Variant(case, False, double, pack, component)
        if symbolic:
            yield Variant(case, True, double, pack, component)


def _symbols(spec_shape: Sequence[Any]) -> set[str]:
    out: set[str] = set()
    for d in spec_shape:
        if isinstance(d, str):
            out |= set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", d))
    return out


def _concrete(shape: Sequence[Any], sizes: dict[str, int]) -> tuple[int, ...]:
    out = []
    for d in shape:
        if isinstance(d, str):
            out.append(int(eval(d, {"__builtins__": {}}, dict(sizes))))  # noqa: S307 - dim expressions like '2*B'
        else:
            out.append(int(d))
    return tuple(out)


def _spec_shape_dtype(spec: Any, double: bool) -> tuple[Sequence[Any], np.dtype]:
    if isinstance(spec, (tuple, list)):
        return spec, np.dtype(np.float64 if double else np.float32)
    dtype = np.dtype(spec.dtype)
    if double and dtype == np.float32:
        return spec.shape, np.dtype(np.float64)
    return spec.shape, np.dtype(jax.dtypes.canonicalize_dtype(dtype))  # what to_onnx declares


def _random(rng: np.random.Generator, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    if dtype == np.bool_:
        return rng.random(shape) > 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 5, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _with_static_sizes(specs: Sequence[Any], sizes: dict[str, int]) -> list[Any]:
    out = []
    for s in specs:
        if isinstance(s, (tuple, list)):
            out.append(_concrete(s, sizes))
        elif isinstance(s, jax.ShapeDtypeStruct):
            out.append(jax.ShapeDtypeStruct(_concrete(s.shape, sizes), s.dtype))
        else:
            out.append(s)
    return out


def op_types(model: onnx.ModelProto) -> set[str]:
    """Every op type in the model: main graph, subgraphs, function bodies."""
    found: set[str] = set()

    def walk(nodes: Any) -> None:
        for n in nodes:
            found.add(n.op_type)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    walk(a.g.node)
                for g in a.graphs:
                    walk(g.node)

    walk(model.graph.node)
    for f in model.functions:
        walk(f.node)
    return found


def run_variant(variant: Variant) -> CaseResult:
    """Export, check with ``onnx.checker`` (full_check), run in onnxruntime, compare with JAX.

    Raises AssertionError describing the first failure.
    """
    case = variant.case
    double = variant.double
    with compat.x64_enabled(double):
        fn = case.build()
        all_syms = sorted(set().union(*[_symbols(_spec_shape_dtype(s, double)[0]) for s in case.input_shapes]) if case.input_shapes else set())
        if case.input_values is not None:
            # JAX itself narrows 64-bit values without x64 (int64 -> int32); feed what it traces.
            values = [np.asarray(v) for v in case.input_values]
            values = [v.astype(jax.dtypes.canonicalize_dtype(v.dtype)) for v in values]
            if double:
                values = [v.astype(np.float64) if v.dtype == np.float32 else v for v in values]
            specs: list[Any] = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in values]
            runs = [values]
        else:
            if variant.symbolic:
                specs = list(case.input_shapes)
                size_sets = [dict.fromkeys(all_syms, n) for n in DYNAMIC_SIZES]
            else:
                sizes = {s: case.static_sizes.get(s, DEFAULT_STATIC_SIZE) for s in all_syms}
                specs = _with_static_sizes(case.input_shapes, sizes)
                size_sets = [sizes]
            rng = np.random.default_rng(0)
            runs = []
            for sizes in size_sets:
                vals = []
                for s in case.input_shapes:
                    shape, dtype = _spec_shape_dtype(s, double)
                    conc = _concrete(shape, sizes)
                    gen = case.input_generator or _random
                    vals.append(np.asarray(gen(rng, conc, dtype)).astype(dtype))
                runs.append(vals)
        params = {k: _param_value(v, double) for k, v in case.input_params.items()}
        model = to_onnx(fn, specs, input_params=dict(case.input_params) or None, enable_double_precision=double,
                        model_name=case.name)
        onnx.checker.check_model(model, full_check=True)
        ops = op_types(model)
        missing = [o for o in case.expected_ops if o not in ops]
        assert not missing, f"{variant.id}: expected ONNX ops {missing} not in graph (has {sorted(ops)})"
        present = [o for o in case.forbidden_ops if o in ops]
        assert not present, f"{variant.id}: ops {present} should have been fused away (graph has {sorted(ops)})"
        if case.max_nodes is not None:
            assert len(model.graph.node) <= case.max_nodes, (
                f"{variant.id}: {len(model.graph.node)} nodes > budget {case.max_nodes}"
            )
        if double:
            for out in model.graph.output:
                et = out.type.tensor_type.elem_type
                assert et != onnx.TensorProto.FLOAT, f"{variant.id}: output {out.name} is float32 under enable_double_precision"
        rtol, atol = (case.rtol_f64, case.atol_f64) if double else (case.rtol, case.atol)
        diffs: list[float] = []
        for vals in runs:
            cmp = allclose(fn, model, vals, params or None, rtol=rtol, atol=atol, enable_double_precision=double)
            assert cmp.ok, f"{variant.id} with input shapes {[v.shape for v in vals]}: {cmp}"
            diffs = [max(a, b) for a, b in zip(diffs, cmp.max_abs_diff)] if diffs else list(cmp.max_abs_diff)
        if case.check is not None:
            case.check(model)
    return CaseResult(model, diffs, len(model.graph.node))


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

"""The keyword arguments ``to_onnx`` shares with the published jax2onnx 0.17 (the same import name).

Programs written against 0.17 call us unchanged, the biggest being Keras 3's
``model.export(path, format="onnx")`` on the JAX backend. This module checks those arguments up
front (in :mod:`jax2onnx.export.options`; every message names the argument and the fix) and
implements here the ones that act on the trace or the model:

* ``return_mode``: ``"proto"`` (an ``onnx.ModelProto``), ``"ir"`` (an ``onnx_ir.Model``),
  ``"file"`` (writes ``output_path`` and returns it);
* ``input_names`` / ``output_names``: the graph's I/O names, set on the finished model;
* ``inputs_as_nchw`` / ``outputs_as_nchw``: the graph takes/returns NCHW where the function works
  in NHWC; :class:`NchwAdapterPass` puts a Transpose at each listed input and output before the
  graph passes, so the transpose pass cancels them against the layout Transposes of a
  channels-first op right behind the input or right before the output (a Conv lowered in NCHW:
  an NHWC conv stack exports with no Transpose left);
* ``record_primitive_calls_file``: a JSON list of every primitive the trace holds;
* ``export_mode``: ``"standard"`` (weights go to ``<path>.data`` when they exceed protobuf's
  limit) or ``"web"`` (always one self-contained file, as onnxruntime-web loads it);
* ``normalization_mode``: ``"auto"``/``"prefer_native"`` emit the native normalization op where
  it maps exactly (what our packs always do); ``"force_decomposed"`` drops the normalization
  lowerings so the library's own arithmetic is exported.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
import onnx_ir as ir

from ..compat import sub_jaxprs, user_location
from ..errors import InputSpecError
from .options import ExportOptions, check_indices

#: The last dotted part of a marked region that is a normalization layer (``layer_norm``,
#: ``batch_norm``, ``rms_norm``, ``group_norm``, ``instance_norm``, optionally ``..._normalization``,
#: and ``jax.nn.standardize``): packs name their normalization marks this way, and
#: ``normalization_mode="force_decomposed"`` drops them (not ``linalg_norm``: a norm, not a layer).
_NORMALIZATION_MARK = re.compile(r"(^|_)(batch|layer|rms|group|instance)_norm(alization)?$|^standardize$")

#: NHWC (what JAX image code uses) <-> NCHW (what ONNX image models take).
NHWC_TO_NCHW = (0, 3, 1, 2)
NCHW_TO_NHWC = (0, 2, 3, 1)


# ---------------------------------------------------------------------------------------------
# Layouts: NCHW at the graph's boundary, NHWC inside the function


def check_input_layouts(options: ExportOptions, args: Sequence[jax.ShapeDtypeStruct]) -> None:
    """Before tracing: ``inputs_as_nchw`` names rank-4 inputs (the function takes them as NHWC)."""
    _check_rank4(options.inputs_as_nchw, "inputs_as_nchw", "input", [a.shape for a in args],
                 "can be given to the graph as (N, C, H, W)")


def check_output_layouts(options: ExportOptions, out_avals: Sequence[Any]) -> None:
    """After tracing, when the outputs are known: ``outputs_as_nchw`` names existing rank-4 outputs."""
    check_indices(options.outputs_as_nchw, "outputs_as_nchw", len(out_avals))
    _check_rank4(options.outputs_as_nchw, "outputs_as_nchw", "output", [a.shape for a in out_avals],
                 "can be returned as (N, C, H, W)")


def _check_rank4(indices: Sequence[int], option: str, what: str, shapes: Sequence[Any], use: str) -> None:
    """Each of ``indices`` (listed by ``option``) names a rank-4 (N, H, W, C) ``what``."""
    for i in indices:
        shape = tuple(shapes[i])
        if len(shape) != 4:
            raise InputSpecError(
                f"{option} lists {what} {i}, which has rank {len(shape)} {shape}; only rank-4 "
                f"(N, H, W, C) {what}s {use}"
            )


class NchwAdapterPass(ir.passes.InPlacePass):
    """``inputs_as_nchw``/``outputs_as_nchw``: the graph takes/returns NCHW where the lowered
    function works in NHWC. A Transpose right behind each listed input and right before each listed
    output; it runs before the graph passes, so the transpose pass cancels these against the layout
    Transposes of a channels-first op next to them (an NHWC conv stack exports with none left)."""

    def __init__(self, options: ExportOptions) -> None:
        super().__init__()
        self.options = options

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        if not (self.options.inputs_as_nchw or self.options.outputs_as_nchw):
            return ir.passes.PassResult(model, False)
        used = {v.name for v in _all_values(model) if v.name}

        def fresh(base: str) -> str:  # the NHWC value beside the NCHW graph input/output
            name = _fresh(f"{base}_nhwc", used)
            used.add(name)
            return name

        for i in self.options.inputs_as_nchw:
            nhwc = graph.inputs[i]
            shape = None if nhwc.shape is None else ir.Shape([nhwc.shape[p] for p in NHWC_TO_NCHW])
            nchw = ir.Value(name=nhwc.name, type=nhwc.type, shape=shape)  # the input keeps its name
            node = ir.node("Transpose", [nchw], {"perm": list(NCHW_TO_NHWC)})
            out = node.outputs[0]
            out.name, out.type, out.shape = fresh(nhwc.name or "input"), nhwc.type, nhwc.shape
            ir.convenience.replace_all_uses_with(nhwc, out)
            graph.inputs[i] = nchw
            if len(graph):
                graph.insert_before(graph.node(0), node)
            else:
                graph.append(node)
        for i in self.options.outputs_as_nchw:
            nhwc = graph.outputs[i]
            node = ir.node("Transpose", [nhwc], {"perm": list(NHWC_TO_NCHW)})
            nchw = node.outputs[0]
            nchw.type = nhwc.type
            nchw.shape = None if nhwc.shape is None else ir.Shape([nhwc.shape[p] for p in NHWC_TO_NCHW])
            nchw.name, nhwc.name = nhwc.name, fresh(nhwc.name or "output")
            graph.append(node)
            graph.outputs[i] = nchw
        return ir.passes.PassResult(model, True)


def with_layouts(fn: Callable[..., Any], options: ExportOptions) -> Callable[..., Any]:
    """``fn`` taking the listed inputs as NCHW and returning the listed outputs as NCHW: the JAX
    function as the exported graph sees it (the reference ``verify=True`` compares with)."""
    if not options.inputs_as_nchw and not options.outputs_as_nchw:
        return fn
    import jax.numpy as jnp

    def transposed(*args: Any, **kwargs: Any) -> Any:
        args = tuple(jnp.transpose(a, NCHW_TO_NHWC) if i in options.inputs_as_nchw else a for i, a in enumerate(args))
        leaves, tree = jax.tree_util.tree_flatten(fn(*args, **kwargs))
        for i in options.outputs_as_nchw:
            leaves[i] = jnp.transpose(leaves[i], NHWC_TO_NCHW)
        return jax.tree_util.tree_unflatten(tree, leaves)

    return transposed


# ---------------------------------------------------------------------------------------------
# normalization_mode


def select_lowerings(lowerings: Mapping[str, Any], options: ExportOptions) -> Mapping[str, Any]:
    """The dispatch table for this export: without the normalization lowerings under
    ``normalization_mode="force_decomposed"`` (their regions' bodies are lowered instead)."""
    if options.normalization_mode != "force_decomposed":
        return lowerings
    return {name: low for name, low in lowerings.items() if not is_normalization_lowering(name)}


def is_normalization_lowering(name: str) -> bool:
    if not name.startswith("call:"):
        return False
    return bool(_NORMALIZATION_MARK.search(name.rsplit(".", 1)[-1]))


# ---------------------------------------------------------------------------------------------
# record_primitive_calls_file


def record_primitive_calls(closed: Any, path: str) -> None:
    """Write every equation of the trace (nested bodies included, in order) as a JSON list:
    primitive, params, input/output shapes and dtypes, source line, nesting depth."""
    records: list[dict[str, Any]] = []

    def aval_text(v: Any) -> dict[str, Any]:
        aval = getattr(v, "aval", None)
        shape = [d if isinstance(d, int) else str(d) for d in getattr(aval, "shape", ())]
        return {"shape": shape, "dtype": str(getattr(aval, "dtype", ""))}

    def walk(jaxpr: Any, depth: int) -> None:
        jaxpr = jaxpr.jaxpr if hasattr(jaxpr, "jaxpr") else jaxpr
        for eqn in jaxpr.eqns:
            params = {k: "<jaxpr>" if _is_jaxpr(v) else _jsonable(v) for k, v in eqn.params.items()}
            records.append({
                "index": len(records),
                "depth": depth,
                "primitive": eqn.primitive.name,
                "params": params,
                "inputs": [aval_text(v) for v in eqn.invars],
                "outputs": [aval_text(v) for v in eqn.outvars],
                "location": user_location(eqn),
            })
            for sub in sub_jaxprs(eqn):
                walk(sub, depth + 1)

    walk(closed, 0)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(records, f, indent=1)


def _is_jaxpr(v: Any) -> bool:
    items = v if isinstance(v, (tuple, list)) else (v,)
    return any(hasattr(i, "eqns") or hasattr(getattr(i, "jaxpr", None), "eqns") for i in items)


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (tuple, list)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    return str(v)


# ---------------------------------------------------------------------------------------------
# input_names / output_names


class IoNamesPass(ir.passes.InPlacePass):
    """``input_names``/``output_names``: give the graph's inputs and outputs the requested names,
    exactly, after the graph passes (which may replace an output value)."""

    def __init__(self, options: ExportOptions) -> None:
        super().__init__()
        self.options = options

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        apply_io_names(model, self.options)
        return ir.passes.PassResult(model, self.options.input_names is not None or self.options.output_names is not None)


def apply_io_names(model: ir.Model, options: ExportOptions) -> None:
    """Give the graph's inputs and outputs the requested names, exactly.

    A value that already holds a requested name is renamed first (ONNX names are model-wide
    unique). An output that is also an input, or listed twice, gets an Identity of its own so each
    name belongs to one value.
    """
    graph = model.graph
    n_out = len(graph.outputs)
    if options.output_names is not None and len(options.output_names) != n_out:
        raise InputSpecError(
            f"output_names has {len(options.output_names)} name(s) but the function returns {n_out} array(s) "
            "(the leaves of its output pytree, in order); give one name per output"
        )
    wanted: dict[int, str] = {}  # id(value) -> name, for inputs and outputs
    if options.input_names is not None:
        for v, name in zip(graph.inputs, options.input_names):
            wanted[id(v)] = name
    if options.output_names is not None:
        inputs = {id(v) for v in graph.inputs}
        seen: set[int] = set()
        for i, name in enumerate(options.output_names):
            v = graph.outputs[i]
            if id(v) in inputs or id(v) in seen:
                node = ir.Node("", "Identity", [v], num_outputs=1)
                out = node.outputs[0]
                out.type, out.shape = v.type, v.shape
                graph.append(node)
                graph.outputs[i] = out
                v = out
            seen.add(id(v))
            wanted[id(v)] = name
    if not wanted:
        return
    taken = set(wanted.values())
    all_values = list(_all_values(model))
    used = {v.name for v in all_values if v.name}
    for v in all_values:
        if id(v) not in wanted and v.name in taken:
            v.name = _fresh(v.name, used | taken)
            used.add(v.name)
    for v in all_values:
        if id(v) in wanted:
            v.name = wanted[id(v)]


def _all_values(model: ir.Model) -> Any:
    seen: set[int] = set()
    graph = model.graph
    for v in (*graph.inputs, *graph.initializers.values(), *graph.outputs):
        if id(v) not in seen:
            seen.add(id(v))
            yield v
    for node in ir.traversal.RecursiveGraphIterator(graph):
        for v in node.outputs:
            if id(v) not in seen:
                seen.add(id(v))
                yield v
        sub_inputs = [i for attr in node.attributes.values() for g in _graphs(attr) for i in g.inputs]
        for v in sub_inputs:
            if id(v) not in seen:
                seen.add(id(v))
                yield v


def _graphs(attr: Any) -> list[ir.Graph]:
    if attr.type == ir.AttributeType.GRAPH:
        return [attr.value]
    if attr.type == ir.AttributeType.GRAPHS:
        return list(attr.value)
    return []


def _fresh(base: str, used: set[str]) -> str:
    n = 1
    while f"{base}_{n}" in used:
        n += 1
    return f"{base}_{n}"

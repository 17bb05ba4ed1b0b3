"""The keyword arguments ``to_onnx`` shares with the published jax2onnx 0.17 (the same import name).

Programs written against 0.17 call us unchanged, the biggest being Keras 3's
``model.export(path, format="onnx")`` on the JAX backend. This module checks those arguments up
front (every message names the argument and the fix) and implements the ones that act on the
traced function or the finished model:

* ``return_mode``: ``"proto"`` (an ``onnx.ModelProto``), ``"ir"`` (an ``onnx_ir.Model``),
  ``"file"`` (writes ``output_path`` and returns it);
* ``input_names`` / ``output_names``: the graph's I/O names, set on the finished model;
* ``inputs_as_nchw`` / ``outputs_as_nchw``: the graph takes/returns NCHW where the function works
  in NHWC; the transposes are traced around the function, so the transpose pass cancels them
  against the layout Transposes of a channels-first op right behind the input or right before
  the output (a Conv lowered in NCHW: an NHWC conv stack exports with no Transpose left);
* ``record_primitive_calls_file``: a JSON list of every primitive the trace holds;
* ``export_mode``: ``"standard"`` (weights go to ``<path>.data`` when they exceed protobuf's
  limit) or ``"web"`` (always one self-contained file, as onnxruntime-web loads it);
* ``normalization_mode``: ``"auto"``/``"prefer_native"`` emit the native normalization op where
  it maps exactly (what our packs always do); ``"force_decomposed"`` drops the normalization
  lowerings so the library's own arithmetic is exported.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
import onnx_ir as ir

from .. import compat
from ..errors import InputSpecError
from ..ir.opsets import MIN_OPSET, max_opset

RETURN_MODES = ("proto", "ir", "file")
EXPORT_MODES = ("standard", "web")
NORMALIZATION_MODES = ("auto", "prefer_native", "force_decomposed")

#: The last dotted part of a marked region that is a normalization layer (``layer_norm``,
#: ``batch_norm``, ``rms_norm``, ``group_norm``, ``instance_norm``, optionally ``..._normalization``,
#: and ``jax.nn.standardize``): packs name their normalization marks this way, and
#: ``normalization_mode="force_decomposed"`` drops them (not ``linalg_norm``: a norm, not a layer).
_NORMALIZATION_MARK = re.compile(r"(^|_)(batch|layer|rms|group|instance)_norm(alization)?$|^standardize$")

#: NHWC (what JAX image code uses) <-> NCHW (what ONNX image models take).
NHWC_TO_NCHW = (0, 3, 1, 2)
NCHW_TO_NHWC = (0, 2, 3, 1)


class OptionTypeError(InputSpecError, TypeError):
    """An option of the wrong type (0.17 raised TypeError here; this is both)."""


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """The checked 0.17-compatible options of one ``to_onnx`` call."""

    return_mode: str = "proto"
    export_mode: str = "standard"
    normalization_mode: str = "auto"
    output_path: str | None = None
    input_names: tuple[str, ...] | None = None
    output_names: tuple[str, ...] | None = None
    inputs_as_nchw: tuple[int, ...] = ()
    outputs_as_nchw: tuple[int, ...] = ()
    record_primitive_calls_file: str | None = None


def _choice(value: Any, allowed: Sequence[str], arg: str) -> str:
    if not isinstance(value, str):
        raise OptionTypeError(f"{arg} must be one of {list(allowed)}, got {type(value).__name__} {value!r}")
    mode = value.strip().lower()
    if mode not in allowed:
        raise InputSpecError(f"{arg}={value!r} is not supported; use one of {list(allowed)}")
    return mode


def _names(names: Any, arg: str) -> tuple[str, ...] | None:
    if names is None:
        return None
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
        raise OptionTypeError(f"{arg} must be a list of strings, one per value, e.g. ['x'], got {names!r}")
    out: list[str] = []
    for i, name in enumerate(names):
        if not isinstance(name, str):
            raise OptionTypeError(f"{arg}[{i}] must be a string, got {type(name).__name__} {name!r}")
        if not name.strip():
            raise InputSpecError(f"{arg}[{i}] is empty; ONNX values need a non-empty name")
        if name in out:
            raise InputSpecError(f"{arg} names {name!r} twice; ONNX graph inputs and outputs need unique names")
        out.append(name)
    return tuple(out)


def _indices(indices: Any, arg: str, upper: int | None) -> tuple[int, ...]:
    if indices is None:
        return ()
    if isinstance(indices, (str, bytes)) or not isinstance(indices, Sequence):
        raise OptionTypeError(f"{arg} must be a list of 0-based indices, e.g. [0], got {indices!r}")
    out: list[int] = []
    for raw in indices:
        if isinstance(raw, bool) or not isinstance(raw, (int, np.integer)):
            raise OptionTypeError(f"{arg} entries must be ints (0-based indices), got {raw!r}")
        i = int(raw)
        if i < 0 or (upper is not None and i >= upper):
            bound = f"0..{upper - 1}" if upper else "none: there are no such values"
            raise InputSpecError(f"{arg} index {i} is out of range (valid: {bound})")
        if i in out:
            raise InputSpecError(f"{arg} lists index {i} twice")
        out.append(i)
    return tuple(out)


def check_opset(opset: Any) -> int:
    """``opset`` as an int in ``MIN_OPSET..max_opset()``, else :class:`InputSpecError` naming the range."""
    top = max_opset()
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)):
        raise OptionTypeError(f"opset must be an int from {MIN_OPSET} to {top}, got {type(opset).__name__} {opset!r}")
    opset = int(opset)
    if not MIN_OPSET <= opset <= top:
        newer = (f"; opset {opset} is newer than the installed onnx {_onnx_version()} knows: upgrade onnx"
                 if opset > top else "")
        raise InputSpecError(f"opset={opset} is not supported: jax2onnx exports opsets {MIN_OPSET} to {top}{newer}")
    return opset


def _onnx_version() -> str:
    import onnx

    return str(onnx.__version__)


def check_options(
    *,
    n_inputs: int | None,
    input_params: Mapping[str, Any] | None,
    return_mode: Any,
    output_path: Any,
    input_names: Any,
    output_names: Any,
    inputs_as_nchw: Any,
    outputs_as_nchw: Any,
    record_primitive_calls_file: Any,
    export_mode: Any,
    normalization_mode: Any,
) -> ExportOptions:
    """Check what can be checked before tracing; raises :class:`InputSpecError` naming the fix.

    ``n_inputs`` is None when ``inputs`` is not a list (the input-spec check names that problem)."""
    mode = _choice(return_mode, RETURN_MODES, "return_mode")
    path = None
    if output_path is not None:
        if not isinstance(output_path, (str, os.PathLike)):
            raise OptionTypeError(f"output_path must be a str or os.PathLike, got {type(output_path).__name__}")
        path = os.fspath(output_path)
    if mode == "file" and path is None:
        raise InputSpecError("return_mode='file' writes the model to output_path: pass output_path='model.onnx'")
    in_names = _names(input_names, "input_names")
    out_names = _names(output_names, "output_names")
    if in_names is not None and n_inputs is not None and len(in_names) != n_inputs:
        raise InputSpecError(
            f"input_names has {len(in_names)} name(s) but there are {n_inputs} positional input(s); "
            "give one name per entry of inputs (input_params keep their own names)"
        )
    params = list(input_params or ())
    for arg, names in (("input_names", in_names), ("output_names", out_names)):
        clash = sorted(set(names or ()) & set(params))
        if clash:
            raise InputSpecError(f"{arg} {clash} collide with input_params names; ONNX graph inputs and outputs need unique names")
    both = sorted(set(in_names or ()) & set(out_names or ()))
    if both:
        raise InputSpecError(f"{both} named both as an input and as an output; ONNX values need unique names")
    record = None
    if record_primitive_calls_file is not None:
        if not isinstance(record_primitive_calls_file, (str, os.PathLike)):
            raise OptionTypeError(f"record_primitive_calls_file must be a path, got {record_primitive_calls_file!r}")
        record = os.fspath(record_primitive_calls_file)
    return ExportOptions(
        return_mode=mode,
        export_mode=_choice(export_mode, EXPORT_MODES, "export_mode"),
        normalization_mode=_choice(normalization_mode, NORMALIZATION_MODES, "normalization_mode"),
        output_path=path,
        input_names=in_names,
        output_names=out_names,
        inputs_as_nchw=_indices(inputs_as_nchw, "inputs_as_nchw", n_inputs),
        # The number of outputs is known after tracing: checked then.
        outputs_as_nchw=_indices(outputs_as_nchw, "outputs_as_nchw", None),
        record_primitive_calls_file=record,
    )


# ---------------------------------------------------------------------------------------------
# Layouts: NCHW at the graph's boundary, NHWC inside the function


def nchw_specs(args: Sequence[jax.ShapeDtypeStruct], options: ExportOptions) -> list[jax.ShapeDtypeStruct]:
    """The parsed input specs as the graph takes them: the listed ones permuted to NCHW."""
    out = list(args)
    for i in options.inputs_as_nchw:
        shape = tuple(args[i].shape)
        if len(shape) != 4:
            raise InputSpecError(
                f"inputs_as_nchw lists input {i}, whose spec has rank {len(shape)} {shape}; only rank-4 "
                "(N, H, W, C) inputs can be given to the graph as (N, C, H, W)"
            )
        out[i] = jax.ShapeDtypeStruct(tuple(shape[p] for p in NHWC_TO_NCHW), args[i].dtype)
    return out


def with_layouts(fn: Callable[..., Any], options: ExportOptions) -> Callable[..., Any]:
    """``fn`` taking the listed inputs as NCHW and returning the listed outputs as NCHW."""
    if not options.inputs_as_nchw and not options.outputs_as_nchw:
        return fn
    import jax.numpy as jnp

    def transposed(*args: Any, **kwargs: Any) -> Any:
        args = tuple(jnp.transpose(a, NCHW_TO_NHWC) if i in options.inputs_as_nchw else a for i, a in enumerate(args))
        out = fn(*args, **kwargs)
        leaves, tree = jax.tree_util.tree_flatten(out)
        _indices(options.outputs_as_nchw, "outputs_as_nchw", len(leaves))
        for i in options.outputs_as_nchw:
            if np.ndim(leaves[i]) != 4:
                raise InputSpecError(
                    f"outputs_as_nchw lists output {i}, which has shape {tuple(np.shape(leaves[i]))}; only rank-4 "
                    "(N, H, W, C) outputs can be returned as (N, C, H, W)"
                )
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
                "location": compat.user_location(eqn),
            })
            for sub in compat.sub_jaxprs(eqn):
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

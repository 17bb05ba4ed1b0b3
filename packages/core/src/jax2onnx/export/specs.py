"""Input specs → ``jax.ShapeDtypeStruct``s, checked before tracing so mistakes get clear errors."""

from __future__ import annotations

import dataclasses
import inspect
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from ..compat import is_key_dtype, is_symbolic_dim, parse_dim_expr, symbolic_dims
from ..errors import InputSpecError

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z_0-9]*$")


@dataclasses.dataclass
class ParsedInputs:
    args: list[jax.ShapeDtypeStruct]  # one per positional input
    names: list[str]  # graph input names
    params: dict[str, jax.ShapeDtypeStruct]  # runtime params (input_params)
    symbols: dict[str, Any]  # symbol name -> JAX dim expression


def _default_float(double: bool) -> np.dtype:
    return np.dtype(np.float64 if double else np.float32)


def _check_dtype(dtype: Any, where: str) -> np.dtype:
    try:
        dt = np.dtype(dtype)
    except TypeError as exc:
        raise InputSpecError(f"{where}: unknown dtype {dtype!r}; use a numpy/jax dtype such as jnp.float32 or jnp.int32.") from exc
    if dt.kind not in "biufc" and dt.name not in _ML_DTYPES:
        raise InputSpecError(f"{where}: dtype {dt} cannot be an ONNX tensor input; use a numeric or bool dtype.")
    return dt


#: ml_dtypes types (numpy kind 'V') that ONNX has tensor types for: BFLOAT16, INT4/UINT4 (opset 21),
#: the FLOAT8 family (opset 19) and FLOAT4E2M1 (opset 23).
_ML_DTYPES = frozenset(
    {"bfloat16", "int4", "uint4", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float4_e2m1fn"}
)


def _check_not_a_class(fn: Any) -> None:
    """A class whose instances are callable (an ``nnx.Module`` subclass, say) passed instead of an
    instance would be traced as its constructor, failing deep inside with a tracer error."""
    if not isinstance(fn, type):
        return
    calls = any("__call__" in vars(klass) for klass in fn.__mro__ if klass is not object)
    if calls:
        name = fn.__name__
        raise InputSpecError(
            f"to_onnx got the class {name} itself, not an instance of it: build the model first, "
            f"e.g. to_onnx({name}(...), inputs) (for an nnx.Module: {name}(..., rngs=nnx.Rngs(0)))"
        )


def _collect_symbols(specs: Sequence[Any]) -> list[str]:
    names: list[str] = []
    for spec in specs:
        shape = getattr(spec, "shape", spec) if not isinstance(spec, (tuple, list)) else spec
        if not isinstance(shape, (tuple, list)):
            continue
        for d in shape:
            if isinstance(d, str):
                for sym in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", d):
                    if sym not in names:
                        names.append(sym)
    return names


def parse_inputs(fn: Callable[..., Any], inputs: Sequence[Any], input_params: Mapping[str, Any] | None, double: bool) -> ParsedInputs:
    if not callable(fn):
        raise InputSpecError(f"to_onnx expects a callable (function or nnx.Module), got {type(fn).__name__}: {fn!r}")
    _check_not_a_class(fn)
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        raise InputSpecError(
            f"inputs must be a list of input specs, one per positional argument, e.g. [('B', 30)]; got {type(inputs).__name__}"
        )
    input_params = dict(input_params or {})
    sym_names = _collect_symbols(inputs)
    try:
        symbols = symbolic_dims(sym_names)
    except Exception as exc:  # noqa: BLE001
        raise InputSpecError(f"cannot create symbolic dims {sym_names}: {exc}") from exc
    # Symbols from ShapeDtypeStructs built with jax.export.symbolic_shape are accepted as they are.
    args = [_parse_one(spec, f"input {i}", symbols, double) for i, spec in enumerate(inputs)]

    names = _input_names(fn, len(args))
    _check_arity(fn, len(args), input_params)
    params: dict[str, jax.ShapeDtypeStruct] = {}
    for pname, default in input_params.items():
        if not isinstance(pname, str) or not _IDENT.match(pname):
            raise InputSpecError(f"input_params key {pname!r} must be a Python identifier naming a keyword argument")
        params[pname] = _parse_param(pname, default, symbols, double)
    return ParsedInputs(args, names, params, symbols)


def _parse_dim(d: Any, where: str, symbols: Mapping[str, Any]) -> Any:
    if isinstance(d, bool):
        raise InputSpecError(f"{where}: dim {d!r} is a bool; use an int size or a string symbol like 'B'")
    if isinstance(d, (int, np.integer)):
        if d < 0:
            raise InputSpecError(f"{where}: negative dim {d}; sizes must be >= 0 (use a string like 'B' for a dynamic size)")
        return int(d)
    if isinstance(d, float):
        if d.is_integer():
            raise InputSpecError(f"{where}: dim {d!r} is a float; write it as the int {int(d)}")
        raise InputSpecError(f"{where}: fractional dim {d!r}; sizes must be whole numbers")
    if isinstance(d, str):
        text = d.strip()
        if _IDENT.match(text):
            return symbols[text]
        try:
            return parse_dim_expr(text, symbols)
        except Exception as exc:  # noqa: BLE001
            raise InputSpecError(f"{where}: cannot parse symbolic dim {d!r} ({exc}); use names like 'B' or expressions like '2*B'") from exc
    if is_symbolic_dim(d) and hasattr(d, "_evaluate"):
        return d
    if d is None:
        raise InputSpecError(f"{where}: dim None is not allowed; name dynamic dims with a string such as 'B'")
    raise InputSpecError(f"{where}: dim {d!r} of type {type(d).__name__} is neither an int nor a symbol string")


def _parse_one(spec: Any, where: str, symbols: Mapping[str, Any], double: bool) -> jax.ShapeDtypeStruct:
    if isinstance(spec, jax.ShapeDtypeStruct):
        shape = tuple(_parse_dim(d, where, symbols) for d in spec.shape)
        if is_key_dtype(spec.dtype):  # typed PRNG keys: the graph input holds their uint32 key data
            return jax.ShapeDtypeStruct(shape, spec.dtype)
        dtype = _check_dtype(spec.dtype, where)
        return jax.ShapeDtypeStruct(shape, _promote(dtype, double))
    if isinstance(spec, (tuple, list)):
        shape = tuple(_parse_dim(d, where, symbols) for d in spec)
        return jax.ShapeDtypeStruct(shape, _default_float(double))
    if hasattr(spec, "shape") and hasattr(spec, "dtype"):  # numpy or jax array: its shape and dtype
        if is_key_dtype(spec.dtype):  # a key array (jax.random.key(0)) as example input
            return jax.ShapeDtypeStruct(tuple(int(d) for d in spec.shape), spec.dtype)
        dtype = _check_dtype(spec.dtype, where)
        return jax.ShapeDtypeStruct(tuple(int(d) for d in spec.shape), _promote(dtype, double))
    if isinstance(spec, (bool, int)):
        raise InputSpecError(
            f"{where}: got the bare {type(spec).__name__} {spec!r}; a shape needs a tuple, e.g. [({spec!r},)] for "
            "a vector, or pass a scalar runtime input through input_params"
        )
    if isinstance(spec, (float, np.number)):
        arr = np.asarray(spec)
        return jax.ShapeDtypeStruct((), _promote(arr.dtype, double) if arr.dtype.kind == "f" else arr.dtype)
    raise InputSpecError(
        f"{where}: cannot use {type(spec).__name__} {spec!r} as an input spec; give a shape tuple like ('B', 30), "
        "a jax.ShapeDtypeStruct, or an array"
    )


def _promote(dtype: np.dtype, double: bool) -> np.dtype:
    """Under enable_double_precision, float32 specs become float64 (physics codes want f64 end to end).
    Otherwise dtypes are what JAX will trace with: without x64, int64 -> int32, float64 -> float32, ..."""
    if double and dtype == np.float32:
        return np.dtype(np.float64)
    return np.dtype(jax.dtypes.canonicalize_dtype(dtype))


def _parse_param(name: str, default: Any, symbols: Mapping[str, Any], double: bool) -> jax.ShapeDtypeStruct:
    where = f"input_params['{name}']"
    if isinstance(default, jax.ShapeDtypeStruct) or isinstance(default, (tuple, list)):
        for d in getattr(default, "shape", default):
            if isinstance(d, str):
                missing = set(re.findall(r"[A-Za-z_][A-Za-z_0-9]*", d)) - set(symbols)
                if missing:
                    raise InputSpecError(
                        f"{where}: symbolic dim {sorted(missing)} is not bound by any positional input; "
                        f"symbols in inputs are {sorted(symbols) or 'none'}"
                    )
        return _parse_one(default, where, symbols, double)
    if isinstance(default, bool) or isinstance(default, np.bool_):
        return jax.ShapeDtypeStruct((), np.dtype(bool))
    if isinstance(default, (int, np.integer)):
        return jax.ShapeDtypeStruct((), np.dtype(np.int64 if double else np.int32))
    if isinstance(default, (float, np.floating)):
        return jax.ShapeDtypeStruct((), _default_float(double))
    if hasattr(default, "shape") and hasattr(default, "dtype"):
        return jax.ShapeDtypeStruct(tuple(default.shape), _promote(_check_dtype(default.dtype, where), double))
    raise InputSpecError(f"{where}: default {default!r} must be a bool, int, float or array")


def _signature(fn: Callable[..., Any]) -> inspect.Signature | None:
    try:
        return inspect.signature(fn)
    except (TypeError, ValueError):
        return None


def _input_names(fn: Callable[..., Any], n: int) -> list[str]:
    sig = _signature(fn)
    names: list[str] = []
    if sig is not None:
        for p in sig.parameters.values():
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and len(names) < n:
                names.append(p.name if _IDENT.match(p.name) else f"input_{len(names)}")
            elif p.kind == p.VAR_POSITIONAL:
                break
    while len(names) < n:
        names.append(f"input_{len(names)}")
    # unique
    seen: dict[str, int] = {}
    out = []
    for nm in names:
        if nm in seen:
            seen[nm] += 1
            nm = f"{nm}_{seen[nm]}"
        else:
            seen[nm] = 0
        out.append(nm)
    return out


def _check_arity(fn: Callable[..., Any], n: int, params: Mapping[str, Any]) -> None:
    sig = _signature(fn)
    if sig is None:
        return
    positional = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    has_var = any(p.kind == p.VAR_POSITIONAL for p in sig.parameters.values())
    has_kw = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
    required = [p for p in positional if p.default is p.empty and p.name not in params]
    if n > len(positional) and not has_var:
        raise InputSpecError(
            f"{len(positional)} positional parameter(s) {[p.name for p in positional]} but {n} input specs were given; "
            "pass one spec per positional argument"
        )
    if n < len(required):
        missing = [p.name for p in required[n:]]
        raise InputSpecError(
            f"too few input specs: {n} given, but parameter(s) {missing} have no default; "
            "add a spec for each, or pass them through input_params"
        )
    names = {p.name for p in sig.parameters.values() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    for pname in params:
        if pname not in names and not has_kw:
            import difflib

            close = difflib.get_close_matches(pname, sorted(names), n=1)
            hint = f" Did you mean '{close[0]}'?" if close else f" Keyword parameters are {sorted(names) or 'none'}."
            raise InputSpecError(f"input_params names '{pname}', which the function does not accept.{hint}")


def check_output_path(path: Any) -> None:
    """Fail before any tracing when ``output_path`` cannot be written: a long conversion should not
    end in a permission error naming a temp file. Names the user's path and the fix."""
    import os

    try:
        target = os.path.abspath(os.fspath(path))
    except TypeError as exc:
        raise InputSpecError(f"output_path must be a str or os.PathLike, got {type(path).__name__}: {path!r}") from exc
    shown = os.fspath(path) if os.fspath(path) == target else f"{os.fspath(path)} ({target})"
    if os.path.isdir(target):
        raise InputSpecError(f"output_path {shown} is a folder; give the model file's path, e.g. {os.path.join(target, 'model.onnx')}")
    folder = os.path.dirname(target)
    existing = folder
    while not os.path.exists(existing):  # the nearest ancestor that exists: where mkdir would start
        parent = os.path.dirname(existing)
        if parent == existing:
            break
        existing = parent
    if not os.path.isdir(existing):
        raise InputSpecError(
            f"cannot write output_path {shown}: {existing} is a file, not a folder; choose another output_path"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        what = "folder" if existing == folder else f"folder {existing} (where {folder} would be created)"
        raise InputSpecError(
            f"cannot write output_path {shown}: the {what} is not writable; choose another output_path "
            "or change the folder's permissions"
        )
    if os.path.exists(target) and not os.access(target, os.W_OK) and not os.access(folder, os.W_OK):
        raise InputSpecError(f"cannot replace output_path {shown}: the file and its folder are read-only")

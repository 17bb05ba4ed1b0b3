"""Weights that are not in memory: export from abstract parameters and a weight source.

A model bigger than the machine's memory cannot be built, but its parameters can be described
(``jax.eval_shape``, ``nnx.eval_shape``, a pytree of ``jax.ShapeDtypeStruct``). Pass them as a
:class:`Weights` input spec together with where their values live; ``to_onnx`` traces with the
abstract values, stores each parameter as an initializer that reads its value only when the model
is written, and writes them to external data one at a time, so memory holds one tensor at once::

    abstract = nnx.eval_shape(lambda: Model(..., rngs=nnx.Rngs(0)))
    graphdef, state = nnx.split(abstract)

    def forward(params, x):
        return nnx.merge(graphdef, params)(x)

    to_onnx(forward, [Weights(state, "model.safetensors"), ("B", 512)], output_path="model.onnx")

A parameter is named by its pytree path joined with dots (``layers.0.kernel``); the source is asked
for that name. Sources: a ``.safetensors`` file (read tensor by tensor, no dependency), a mapping
``name -> array``, or a callable ``name -> array``.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
import onnx_ir as ir

from ..errors import InputSpecError


@dataclasses.dataclass
class Weights:
    """An input spec: a pytree of abstract parameters (``ShapeDtypeStruct`` leaves, or arrays)
    whose values come from ``source`` when the model is written. It becomes initializers, not
    graph inputs."""

    tree: Any
    source: Any

    def __post_init__(self) -> None:
        self.source = as_source(self.source)


class WeightSource:
    """Where parameter values live: ``load(name)`` returns one array (read on demand)."""

    def load(self, name: str) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError

    def describe(self) -> str:
        return type(self).__name__


class CallableSource(WeightSource):
    def __init__(self, fn: Callable[[str], Any], what: str = "callable"):
        self._fn = fn
        self._what = what

    def load(self, name: str) -> np.ndarray:
        return np.asarray(self._fn(name))

    def describe(self) -> str:
        return self._what


class SafetensorsSource(WeightSource):
    """A ``.safetensors`` file: an 8-byte header length, a JSON header (name → dtype, shape, byte
    range), then the raw little-endian bytes. Each tensor is read with one positioned read, so only
    the tensor being written is in memory."""

    _DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
               "I16": np.int16, "I8": np.int8, "U8": np.uint8, "U16": np.uint16, "U32": np.uint32,
               "U64": np.uint64, "BOOL": np.bool_}

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        try:
            with open(self.path, "rb") as f:
                (n,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(n))
        except (OSError, ValueError, struct.error) as exc:
            raise InputSpecError(f"cannot read the safetensors file {self.path!r}: {exc}") from exc
        self._offset = 8 + n
        self.entries = {k: v for k, v in header.items() if k != "__metadata__"}

    def _dtype(self, code: str) -> np.dtype:
        if code == "BF16":
            import ml_dtypes

            return np.dtype(ml_dtypes.bfloat16)
        if code not in self._DTYPES:
            raise InputSpecError(f"{self.path}: safetensors dtype {code} is not supported")
        return np.dtype(self._DTYPES[code])

    def load(self, name: str) -> np.ndarray:
        entry = self.entries.get(name)
        if entry is None:
            import difflib

            close = difflib.get_close_matches(name, list(self.entries), n=1)
            raise InputSpecError(f"{self.path} has no tensor {name!r}" + (f"; did you mean {close[0]!r}?" if close else ""))
        start, end = entry["data_offsets"]
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, end - start, self._offset + start)
        finally:
            os.close(fd)
        return np.frombuffer(data, dtype=self._dtype(entry["dtype"])).reshape(entry["shape"])

    def describe(self) -> str:
        return self.path


def as_source(source: Any) -> WeightSource:
    if isinstance(source, WeightSource):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if path.endswith(".safetensors") or os.path.isfile(path):
            return SafetensorsSource(path)
        raise InputSpecError(
            f"weight source {path!r} is not a .safetensors file; pass a file, a mapping name -> array, or a "
            "callable name -> array (an Orbax checkpoint can be read with orbax.checkpoint and passed as a callable)"
        )
    if isinstance(source, Mapping):
        return CallableSource(source.__getitem__, "mapping")
    if callable(source):
        return CallableSource(source)
    raise InputSpecError(f"cannot use {type(source).__name__} as a weight source; pass a .safetensors path, a mapping or a callable")


def leaf_name(path: Sequence[Any]) -> str:
    parts = []
    for key in path:
        for attr in ("name", "key", "idx"):
            if hasattr(key, attr):
                parts.append(str(getattr(key, attr)))
                break
        else:
            parts.append(str(key))
    return ".".join(parts)


@dataclasses.dataclass
class WeightLeaf:
    name: str
    spec: jax.ShapeDtypeStruct
    source: WeightSource


@dataclasses.dataclass
class BoundWeights:
    """The function rewritten to take every weight leaf as a trailing positional argument."""

    fn: Callable[..., Any]
    inputs: list[Any]  # plain specs, then one ShapeDtypeStruct per leaf
    n_plain: int
    leaves: list[WeightLeaf]


def bind(fn: Callable[..., Any], inputs: Sequence[Any]) -> BoundWeights | None:
    """None when no input spec is a :class:`Weights`."""
    slots = [i for i, spec in enumerate(inputs) if isinstance(spec, Weights)]
    if not slots:
        return None
    plain = [spec for i, spec in enumerate(inputs) if i not in slots]
    leaves: list[WeightLeaf] = []
    treedefs = []
    for i in slots:
        w = inputs[i]
        flat, treedef = jax.tree_util.tree_flatten_with_path(w.tree)
        treedefs.append((i, treedef, len(flat)))
        for path, leaf in flat:
            if not hasattr(leaf, "shape") or not hasattr(leaf, "dtype"):
                raise InputSpecError(f"Weights leaf {leaf_name(path)!r} is a {type(leaf).__name__}; leaves must be "
                                     "jax.ShapeDtypeStruct (or arrays)")
            leaves.append(WeightLeaf(leaf_name(path), jax.ShapeDtypeStruct(tuple(leaf.shape), leaf.dtype), w.source))
    names = [leaf.name for leaf in leaves]
    if len(set(names)) != len(names):
        raise InputSpecError("two Weights leaves have the same name; give each Weights tree distinct paths")
    n_plain = len(plain)

    def with_weights(*args: Any, **kwargs: Any) -> Any:
        plain_args, flat = list(args[:n_plain]), list(args[n_plain:])
        full: list[Any] = []
        pos = 0
        for i in range(len(inputs)):
            slot = next((t for t in treedefs if t[0] == i), None)
            if slot is None:
                full.append(plain_args.pop(0))
            else:
                _, treedef, n = slot
                full.append(jax.tree_util.tree_unflatten(treedef, flat[pos : pos + n]))
                pos += n
        return fn(*full, **kwargs)

    with_weights.__name__ = getattr(fn, "__name__", "fn")
    with_weights.__signature__ = _plain_signature(fn, slots, len(inputs), len(leaves))
    return BoundWeights(with_weights, [*plain, *(leaf.spec for leaf in leaves)], n_plain, leaves)


def _plain_signature(fn: Callable[..., Any], slots: Sequence[int], n_inputs: int, n_leaves: int) -> inspect.Signature:
    """The wrapper's signature: ``fn``'s own names for the plain inputs (they name the graph inputs),
    then one positional parameter per weight leaf."""
    P = inspect.Parameter
    try:
        params = [p for p in inspect.signature(fn).parameters.values() if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
        keywords = [p for p in inspect.signature(fn).parameters.values() if p.kind in (P.KEYWORD_ONLY, P.VAR_KEYWORD)]
    except (TypeError, ValueError):
        params, keywords = [], []
    names = [params[i].name if i < len(params) else f"input_{i}" for i in range(n_inputs) if i not in slots]
    plain = [P(n, P.POSITIONAL_OR_KEYWORD) for n in names]
    leaves = [P(f"_jax2onnx_weight_{k}", P.POSITIONAL_OR_KEYWORD) for k in range(n_leaves)]
    return inspect.Signature([*plain, *leaves, *keywords])


def is_lazy(value: ir.Value | None) -> bool:
    """A weight that is read on demand: passes must not evaluate it (that would load it)."""
    return value is not None and isinstance(value.const_value, ir.LazyTensor)


__all__ = ["Weights", "WeightSource", "SafetensorsSource", "CallableSource", "bind", "is_lazy"]

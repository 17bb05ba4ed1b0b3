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
for that name. Sources: a ``.safetensors`` file (read tensor by tensor, no dependency), an Orbax
checkpoint folder (what ``ocp.StandardCheckpointer().save`` writes, also from a sharded run: read
array by array, see :class:`OrbaxSource`), a mapping ``name -> array``, or a callable ``name -> array``.
A file or checkpoint lists its tensors up front, so a missing tensor or one of another shape or
dtype is refused before anything is traced or written.
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

    def catalog(self) -> dict[str, jax.ShapeDtypeStruct] | None:
        """Every tensor's name, shape and dtype when the source knows them without reading the
        tensors (a file's header, a checkpoint's metadata): a wrong source is then refused before
        anything is traced or written. None: known only when each tensor is loaded."""
        return None


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
    range), then the raw little-endian bytes. Each tensor is read with positioned reads, so only
    the tensor being written is in memory. The header is checked against the file when it is
    opened: a file cut short or a damaged header is refused then, naming the file."""

    _DTYPES = {"F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
               "I16": np.int16, "I8": np.int8, "U8": np.uint8, "U16": np.uint16, "U32": np.uint32,
               "U64": np.uint64, "BOOL": np.bool_}

    def __init__(self, path: str | os.PathLike[str]):
        self.path = os.fspath(path)
        fix = "write or download it again"
        try:
            size = os.path.getsize(self.path)
            with open(self.path, "rb") as f:
                head = f.read(8)
                if len(head) < 8:
                    raise InputSpecError(f"{self.path!r} is not a safetensors file: it holds {size} bytes, fewer than "
                                         f"the 8 of the header's length; {fix}")
                (n,) = struct.unpack("<Q", head)
                if n > size - 8:
                    raise InputSpecError(f"the safetensors file {self.path!r} is cut short or not a safetensors file: "
                                         f"its first 8 bytes give a {n}-byte header, the file holds {size} bytes; {fix}")
                header = json.loads(f.read(n))
        except (OSError, ValueError, struct.error) as exc:
            if isinstance(exc, InputSpecError):
                raise
            raise InputSpecError(f"cannot read the safetensors file {self.path!r} ({exc}); {fix}") from exc
        if not isinstance(header, dict):
            raise InputSpecError(f"the safetensors file {self.path!r} has a header that is not a JSON object; {fix}")
        self._offset = 8 + n
        self.entries = {k: v for k, v in header.items() if k != "__metadata__"}
        self._check_layout(size - self._offset, fix)

    def _check_layout(self, data_bytes: int, fix: str) -> None:
        """Every entry's byte range fits its shape and dtype and lies in the file: a file cut short
        (an interrupted download or copy) or a damaged header is refused now, naming the file,
        rather than failing as a reshape when the tensor is read mid-export."""
        end_of_data = 0
        for name, entry in self.entries.items():
            try:
                start, end = (int(v) for v in entry["data_offsets"])
                count = int(np.prod([int(d) for d in entry["shape"]], dtype=np.int64))
                code = entry["dtype"]
            except (KeyError, TypeError, ValueError) as exc:
                raise InputSpecError(f"the safetensors file {self.path!r}: the header entry of {name!r} is malformed "
                                     f"({exc!r}: it needs dtype, shape and data_offsets); {fix}") from exc
            want = count * self._dtype(code).itemsize
            if not 0 <= start <= end or end - start != want:
                raise InputSpecError(f"the safetensors file {self.path!r}: tensor {name!r} ({code}{list(entry['shape'])}, "
                                     f"{want} bytes) has the byte range {start}..{end}; the header is damaged; {fix}")
            end_of_data = max(end_of_data, end)
        if end_of_data > data_bytes:
            raise InputSpecError(f"the safetensors file {self.path!r} is cut short: its header places tensors up to byte "
                                 f"{end_of_data} of the data, which holds {data_bytes} bytes (an interrupted download or "
                                 f"copy?); {fix}")

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
        data = self._read(self._offset + start, end - start)
        if len(data) != end - start:  # it was complete when opened: changed since
            raise InputSpecError(f"the safetensors file {self.path!r} ended at tensor {name!r}: {len(data)} of its "
                                 f"{end - start} bytes are there (the file was cut short or replaced during the export); "
                                 "write it again and export again")
        return np.frombuffer(data, dtype=self._dtype(entry["dtype"])).reshape(entry["shape"])

    def catalog(self) -> dict[str, jax.ShapeDtypeStruct]:
        return {name: jax.ShapeDtypeStruct(tuple(e["shape"]), self._dtype(e["dtype"])) for name, e in self.entries.items()}

    def _read(self, offset: int, size: int) -> bytes | bytearray:
        """``size`` bytes at ``offset``, fewer only at the end of the file (one ``pread`` returns at
        most about 2 GiB on Linux: a larger tensor takes several)."""
        fd = os.open(self.path, os.O_RDONLY)
        try:
            data = os.pread(fd, size, offset)
            if len(data) == size or not data:
                return data
            buffer = bytearray(data)
            while len(buffer) < size and (more := os.pread(fd, size - len(buffer), offset + len(buffer))):
                buffer += more
            return buffer
        finally:
            os.close(fd)

    def describe(self) -> str:
        return self.path


#: Files that mark a folder as one Orbax PyTree checkpoint (an item of a step).
_ITEM_MARKERS = ("_METADATA", "manifest.ocdbt")


def is_orbax_checkpoint(path: str) -> bool:
    """``path`` is an Orbax checkpoint folder, a step folder holding one, or a manager's root."""
    return os.path.isdir(path) and (_item_folder(path) is not None or bool(_steps(path)))


def _is_item(path: str) -> bool:
    return any(os.path.exists(os.path.join(path, m)) for m in _ITEM_MARKERS)


def _subfolders(path: str) -> list[str]:
    try:
        return sorted(n for n in os.listdir(path) if os.path.isdir(os.path.join(path, n)) and not n.startswith("."))
    except OSError:
        return []


def _steps(path: str) -> list[str]:
    return sorted((n for n in _subfolders(path) if n.isdigit()), key=int)


def _item_folder(path: str) -> str | None:
    """The checkpoint folder itself, or the one item of a step folder (``<step>/default``)."""
    if _is_item(path):
        return path
    items = [n for n in _subfolders(path) if _is_item(os.path.join(path, n))]
    return os.path.join(path, items[0]) if len(items) == 1 else None


def _orbax() -> Any:
    try:
        import orbax.checkpoint as ocp
    except ImportError as exc:
        raise InputSpecError(
            "reading an Orbax checkpoint needs orbax-checkpoint: pip install 'jax2onnx-core[orbax]' "
            "(or orbax-checkpoint)"
        ) from exc
    if not hasattr(ocp, "PLACEHOLDER"):
        raise InputSpecError(
            f"orbax-checkpoint {getattr(ocp, '__version__', '?')} cannot restore one array at a time "
            "(it has no ocp.PLACEHOLDER); upgrade it: pip install -U orbax-checkpoint"
        )
    return ocp


class OrbaxSource(WeightSource):
    """An Orbax checkpoint, read one array at a time (no full restore): what a JAX training run
    saves (``ocp.StandardCheckpointer().save(dir, state)``, or a ``CheckpointManager`` step folder
    ``<root>/<step>``, whose one item is used). Its metadata lists every array's tree path, shape
    and dtype without reading any; a weight is read by a restore in which every other leaf is
    Orbax's ``PLACEHOLDER`` (not read), onto the host as numpy (``restore_type=np.ndarray``), so a
    checkpoint saved from a sharded run is read without its mesh or devices. Names are the tree
    paths joined with dots, as :class:`Weights` names its leaves (``nnx.state(model)`` saved by
    Orbax matches ``Weights(nnx.state(abstract_model), dir)``). Needs ``orbax-checkpoint``
    (``jax2onnx-core[orbax]``; Flax depends on it already)."""

    def __init__(self, path: str | os.PathLike[str]):
        given = os.fspath(path)
        # absolute: orbax-checkpoint reads no metadata from a relative path (it then lists no arrays)
        folder = _item_folder(os.path.abspath(given)) if os.path.isdir(given) else None
        if folder is None:
            steps = _steps(given) if os.path.isdir(given) else []
            hint = (f"; it holds the CheckpointManager steps {', '.join(steps[-5:])}: pass one step's folder, e.g. "
                    f"{os.path.join(given, steps[-1])!r}" if steps else "")
            raise InputSpecError(f"{given!r} is not an Orbax checkpoint folder (no _METADATA in it or in one item "
                                 f"folder){hint}")
        self.path = folder
        self._ocp = _orbax()
        self._checkpointer = self._ocp.PyTreeCheckpointer()
        try:
            metadata = self._checkpointer.metadata(folder)
        except (OSError, ValueError, KeyError) as exc:
            raise InputSpecError(f"cannot read the Orbax checkpoint metadata in {folder!r}: {exc}") from exc
        tree = getattr(getattr(metadata, "item_metadata", metadata), "tree", None)
        if tree is None:  # older orbax-checkpoint: the metadata is the tree itself
            tree = getattr(metadata, "item_metadata", metadata)
        flat, self._treedef = jax.tree_util.tree_flatten_with_path(tree)
        #: name -> (leaf position, shape, dtype), from the metadata alone
        self.entries: dict[str, tuple[int, tuple[int, ...], np.dtype]] = {}
        for i, (keypath, meta) in enumerate(flat):
            if getattr(meta, "shape", None) is not None and getattr(meta, "dtype", None) is not None:
                self.entries[leaf_name(keypath)] = (i, tuple(int(d) for d in meta.shape), np.dtype(meta.dtype))
        self._n_leaves = len(flat)
        if not self.entries:
            raise InputSpecError(f"the Orbax checkpoint {folder!r} lists no arrays: its metadata (_METADATA) is missing "
                                 "or unreadable, so the checkpoint is incomplete (an interrupted save or copy?); save "
                                 "or copy it again")

    def catalog(self) -> dict[str, jax.ShapeDtypeStruct]:
        return {name: jax.ShapeDtypeStruct(shape, dtype) for name, (_, shape, dtype) in self.entries.items()}

    def load(self, name: str) -> np.ndarray:
        entry = self.entries.get(name)
        if entry is None:
            import difflib

            close = difflib.get_close_matches(name, list(self.entries), n=1)
            raise InputSpecError(f"the Orbax checkpoint {self.path} has no array {name!r}"
                                 + (f"; did you mean {close[0]!r}?" if close else ""))
        index, shape, dtype = entry
        ocp = self._ocp
        skip = ocp.PLACEHOLDER
        item = jax.tree_util.tree_unflatten(
            self._treedef, [jax.ShapeDtypeStruct(shape, dtype) if i == index else skip for i in range(self._n_leaves)])
        restore_args = jax.tree_util.tree_unflatten(
            self._treedef, [ocp.RestoreArgs(restore_type=np.ndarray) if i == index else skip for i in range(self._n_leaves)])
        try:
            restored = self._checkpointer.restore(self.path, args=ocp.args.PyTreeRestore(item=item, restore_args=restore_args))
        except Exception as exc:  # tensorstore's and orbax's errors: a file under the folder missing or cut short
            problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputSpecError(f"cannot read the array {name!r} of the Orbax checkpoint {self.path!r}: {problem}. A "
                                 "file of the checkpoint is missing or damaged (an interrupted save or copy?); save or "
                                 "copy the checkpoint again") from exc
        return np.asarray(self._treedef.flatten_up_to(restored)[index])

    def describe(self) -> str:
        return f"the Orbax checkpoint {self.path}"


def as_source(source: Any) -> WeightSource:
    if isinstance(source, WeightSource):
        return source
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path):
            return OrbaxSource(path)
        if path.endswith(".safetensors") or os.path.isfile(path):
            return SafetensorsSource(path)
        raise InputSpecError(
            f"weight source {path!r} does not exist; pass a .safetensors file, an Orbax checkpoint folder, a mapping "
            "name -> array, or a callable name -> array"
        )
    if isinstance(source, Mapping):
        return CallableSource(source.__getitem__, "mapping")
    if callable(source):
        return CallableSource(source)
    raise InputSpecError(f"cannot use {type(source).__name__} as a weight source; pass a .safetensors path, an Orbax "
                         "checkpoint folder, a mapping or a callable")


def source_problems(source: WeightSource, wanted: Mapping[str, Any]) -> tuple[list[str], list[tuple[str, Any, Any]]]:
    """What ``source`` lacks of ``wanted`` (name -> shape/dtype): the missing names, and
    ``(name, found, wanted)`` for each tensor of another shape or dtype; both empty when the
    source's catalog is unknown (:meth:`WeightSource.catalog`: then each tensor is checked when
    it is loaded)."""
    have = source.catalog()
    if have is None:
        return [], []
    missing = [name for name in wanted if name not in have]
    wrong = [(name, have[name], spec) for name, spec in wanted.items() if name in have and
             (tuple(have[name].shape) != tuple(spec.shape) or np.dtype(have[name].dtype) != np.dtype(spec.dtype))]
    return missing, wrong


def _describe(spec: Any) -> str:
    return f"{np.dtype(spec.dtype).name}{list(spec.shape)}"


def check_source(source: WeightSource, wanted: Mapping[str, Any]) -> None:
    """Refuse, before anything is traced or written, a source whose catalog lacks a wanted tensor
    or holds one of another shape or dtype, naming them all."""
    missing, wrong = source_problems(source, wanted)
    if not missing and not wrong:
        return
    lines = []
    if missing:
        import difflib

        have = list(source.catalog() or ())
        close = difflib.get_close_matches(missing[0], have, n=1)
        lines.append(f"{source.describe()} has no tensor {missing[0]!r}" + (f"; did you mean {close[0]!r}?" if close else "")
                     + (f" ({len(missing)} of the {len(wanted)} weights are missing: {', '.join(missing[:8])}"
                        f"{', ...' if len(missing) > 8 else ''})" if len(missing) > 1 else ""))
    for name, found, spec in wrong[:8]:
        lines.append(f"{name!r} is {_describe(found)} in {source.describe()}, the abstract parameter is {_describe(spec)}")
    if len(wrong) > 8:
        lines.append(f"... and {len(wrong) - 8} more of another shape or dtype")
    raise InputSpecError("; ".join(lines) + "; nothing was written. Save the tensors under the Weights tree's names "
                         "(pytree paths joined with dots) with its shapes and dtypes, or pass a callable name -> array "
                         "that maps them")


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
    for i in slots:
        check_source(inputs[i].source, {leaf.name: leaf.spec for leaf in leaves if leaf.source is inputs[i].source})
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


__all__ = ["Weights", "WeightSource", "SafetensorsSource", "OrbaxSource", "CallableSource", "bind", "check_source",
           "is_lazy", "source_problems"]

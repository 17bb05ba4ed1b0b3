"""Writing models so that no crash can leave a model beside the wrong weights.

Readers only ever see complete files, and a model with external data is committed as a pair:

1. everything is written into a temp folder beside the target
   (``.jax2onnx-tmp-<host>-<pid>-<random>``);
2. the weights file is named after its content (``<model file>.<16 hex>.data``) and moved into
   place first: a name the current model does not reference (or, for the same hash, the same
   bytes), so the old pair stays intact;
3. the model file is moved over the old one (an atomic rename): from here on the new pair is live;
4. weights files of earlier exports of this model are removed.

Killed at any point, the folder holds the old pair or the new pair, plus leftovers (temp folders,
an unreferenced weights file) that the next save into the folder removes: temp entries of
processes that are no longer running (or older than a day, whatever their origin), and weights
files of this model's name that its model file does not reference.

This module needs only the standard library, ``onnx`` and ``onnx_ir`` (a crash test runs it in a
bare subprocess).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import onnx
import onnx_ir as ir

#: Every temp entry this module creates starts with this (older versions used ``.jax2onnx-``).
TEMP_PREFIX = ".jax2onnx-tmp-"
_LEGACY_TEMP_PREFIX = ".jax2onnx-"
#: Temp entries older than this are removed whoever made them (a crashed export on another host).
STALE_SECONDS = 24 * 3600
#: Tensors larger than this go to the external data file (onnx_ir's size_threshold_bytes).
EXTERNAL_THRESHOLD_BYTES = 1024

#: The steps of :func:`save_with_external_data`, in order; a test hook can stop the process at each.
SAVE_STEPS = ("writing", "temp-written", "data-committed", "model-committed", "done")
#: Called with each step name; tests set it to kill the process mid-save.
_STEP_HOOK: Callable[[str], None] | None = None


def _step(name: str) -> None:
    if _STEP_HOOK is not None:
        _STEP_HOOK(name)


def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:24] or "host"


def _temp_name() -> str:
    return f"{TEMP_PREFIX}{_host_tag()}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def _pid_alive(pid: int) -> bool:
    if os.name == "nt":  # os.kill(pid, 0) would terminate the process on Windows
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_stale(directory: str, name: str, now: float) -> bool:
    path = os.path.join(directory, name)
    try:
        age = now - os.lstat(path).st_mtime
    except OSError:
        return False
    if age > STALE_SECONDS:
        return True
    if name.startswith(TEMP_PREFIX):
        host, _, rest = name[len(TEMP_PREFIX) :].partition("-")
        pid_text = rest.partition("-")[0]
        if host == _host_tag() and pid_text.isdigit():
            pid = int(pid_text)
            return pid != os.getpid() and not _pid_alive(pid)
    return False


def clean_stale_temporaries(directory: str | os.PathLike[str]) -> list[str]:
    """Remove temp entries left in ``directory`` by exports that were killed; returns their names."""
    directory = os.fspath(directory)
    removed = []
    now = time.time()
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for name in names:
        if not name.startswith(_LEGACY_TEMP_PREFIX) or not _is_stale(directory, name, now):
            continue
        path = os.path.join(directory, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            continue  # another process cleaning the same folder got there first
        removed.append(name)
    return removed


def _data_pattern(model_file: str) -> re.Pattern[str]:
    """Weights files that belong to the model file ``model_file`` (this module's names and the
    plain ``<model file>.data`` of earlier versions)."""
    return re.compile(re.escape(model_file) + r"(\.[0-9a-f]{16})?\.data")


def _remove_orphaned_data(directory: str, model_file: str, keep: str | None) -> None:
    pattern = _data_pattern(model_file)
    for name in os.listdir(directory):
        if name != keep and pattern.fullmatch(name):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(directory, name))


@contextlib.contextmanager
def _folder_lock(directory: str) -> Any:
    """Serialise the commit step of saves into one folder (across processes, where ``flock``
    exists): one save's cleanup must not delete the weights another save just moved in."""
    try:
        import fcntl
    except ImportError:  # Windows: renames still keep each pair consistent, cleanup may race
        yield
        return
    fd = None
    try:
        fd = os.open(directory, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:  # a filesystem without flock: same as above
        if fd is not None:
            os.close(fd)
        fd = None
    try:
        yield
    finally:
        if fd is not None:
            os.close(fd)


def _fsync_dir(directory: str) -> None:
    with contextlib.suppress(OSError, AttributeError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _fsync_file(path: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def weights_digest(model: ir.Model, data_path: str) -> str:
    """16 hex digits naming the weights file: a function of the bytes written to ``data_path``, of
    every initializer's name and type, and of the writer's version (which fixes the file layout).

    The file is hashed after it is written, read back in chunks, rather than hashing the tensors
    before writing them: a weight read from a ``Weights`` source is then read once, not twice (an
    8 GB streamed export spent half its time reading its source a second time for the digest)."""
    h = hashlib.sha256(f"onnx_ir {ir.__version__} threshold {EXTERNAL_THRESHOLD_BYTES}\n".encode())
    for name, value in model.graph.initializers.items():
        tensor = value.const_value
        if tensor is not None:  # nbytes and shape come from the type: a lazy weight is not loaded here
            h.update(f"{name}\0{tensor.dtype}\0{tuple(tensor.shape)}\0{tensor.nbytes}\0".encode())
    buffer = bytearray(16 * 2**20)
    view = memoryview(buffer)
    with open(data_path, "rb", buffering=0) as f:
        while n := f.readinto(buffer):
            h.update(view[:n])
    return h.hexdigest()[:16]


def _relocate(model_path: str, old: str, new: str) -> None:
    """Point the external-data entries of the (weightless) model file at ``new`` instead of ``old``."""
    proto = onnx.load(model_path, load_external_data=False)

    # its own walk, not proto_walk.graphs: this module imports nothing of the package, so the
    # crash test can load it alone (test_external_data_atomic kills a process mid-save)
    def graphs(g: onnx.GraphProto) -> Any:
        yield g
        for node in g.node:
            for attr in node.attribute:
                if attr.type == onnx.AttributeProto.GRAPH:
                    yield from graphs(attr.g)
                elif attr.type == onnx.AttributeProto.GRAPHS:
                    for sub in attr.graphs:
                        yield from graphs(sub)

    def tensors() -> Any:
        for g in graphs(proto.graph):
            yield from g.initializer
            for node in g.node:
                for attr in node.attribute:
                    yield from ([attr.t] if attr.type == onnx.AttributeProto.TENSOR else attr.tensors)
        for fn in proto.functions:
            for node in fn.node:
                for attr in node.attribute:
                    yield from ([attr.t] if attr.type == onnx.AttributeProto.TENSOR else attr.tensors)

    for tensor in tensors():
        if tensor.data_location == onnx.TensorProto.EXTERNAL:
            for entry in tensor.external_data:
                if entry.key == "location" and entry.value == old:
                    entry.value = new
    with open(model_path, "wb") as f:
        f.write(proto.SerializeToString())


def _serde_cause(exc: BaseException) -> BaseException:
    """The error under onnx_ir's serialization wrappers: a weight source's own message (a missing
    tensor, a wrong shape, raised when the weight is loaded for writing) instead of "Error calling
    serialize_model_into"."""
    while isinstance(exc, ir.serde.SerdeError) and exc.__cause__ is not None:
        exc = exc.__cause__
    return exc


def _prepare(path: str | os.PathLike[str]) -> tuple[str, str, str]:
    path = os.path.abspath(os.fspath(path))
    directory, model_file = os.path.split(path)
    os.makedirs(directory, exist_ok=True)
    clean_stale_temporaries(directory)
    return path, directory, model_file


def save_with_external_data(model: ir.Model, path: str | os.PathLike[str], data_file: str | None = None,
                            on_tensor: Callable[[int, int, int], None] | None = None) -> onnx.ModelProto:
    """Write ``path`` plus ``<path>.<hash>.data`` (tensors streamed from the IR, not copied into a
    proto) as one crash-consistent pair; returns the model proto without its weights.

    ``data_file``: a fixed name for the weights file instead (``ExportOptions.external_data_file``:
    a front-end writing a staging folder that it renames into place as a whole); the same steps
    run, but a crash between the two renames can pair an old model with new weights, which is why
    only a folder that is itself replaced atomically should ask for it.

    ``on_tensor(index, count, nbytes)``: called as each of the ``count`` external tensors is about
    to be written (a progress bar's hook)."""
    path, directory, model_file = _prepare(path)
    temp_dir = os.path.join(directory, _temp_name())
    os.mkdir(temp_dir)
    try:
        temp_model = os.path.join(temp_dir, model_file)
        # Written under a provisional name, renamed after its content once that is known (each
        # weight is loaded once, for the write; see weights_digest).
        pending = f"{model_file}.pending.data"

        def each_tensor(tensor: Any, info: Any) -> None:
            _step("writing")
            if on_tensor is not None:
                on_tensor(info.index, info.total, tensor.nbytes)

        try:
            ir.save(model, temp_model, external_data=pending, size_threshold_bytes=EXTERNAL_THRESHOLD_BYTES,
                    callback=each_tensor if _STEP_HOOK is not None or on_tensor is not None else None)
        except ir.serde.SerdeError as exc:
            raise _serde_cause(exc) from None
        temp_pending = os.path.join(temp_dir, pending)
        if not os.path.exists(temp_pending):  # every weight under the threshold: still a valid pair
            open(temp_pending, "wb").close()
        if data_file is None:
            data_file = f"{model_file}.{weights_digest(model, temp_pending)}.data"
        temp_data = os.path.join(temp_dir, data_file)
        os.replace(temp_pending, temp_data)
        _relocate(temp_model, pending, data_file)
        _fsync_file(temp_data)
        _fsync_file(temp_model)
        _step("temp-written")
        with _folder_lock(directory):
            os.replace(temp_data, os.path.join(directory, data_file))
            _fsync_dir(directory)
            _step("data-committed")
            os.replace(temp_model, path)
            _fsync_dir(directory)
            _step("model-committed")
            _remove_orphaned_data(directory, model_file, keep=data_file)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)
    _step("done")
    return onnx.load(path, load_external_data=False)


def _create_temp(directory: str, suffix: str) -> tuple[int, str]:
    """A new temp file like ``mkstemp``'s, but created with mode 0666 so the umask applies and the
    renamed model gets the mode any new file gets (mkstemp's 0600 survived the rename)."""
    for _ in range(100):
        tmp = os.path.join(directory, f"{_temp_name()}{suffix}")  # unique: host, pid, random
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a temp file in {directory}")


def save_model_file(model: ir.Model, path: str | os.PathLike[str],
                    on_tensor: Callable[[int, int, int], None] | None = None) -> None:
    """Write one self-contained model file: temp file beside ``path``, then an atomic rename, so
    readers never see a partial model. Weights files of an earlier external-data export of this
    path are removed once the new model is in place.

    The file is written tensor by tensor (:func:`_model_pieces`), never as one serialized message:
    protobuf's ``SerializeToString`` holds the GIL throughout (192 MiB: 2 s with no other thread
    running; a progress bar froze for 26 s on a 1.5 GB model, ``bench/results/progress_gaps.md``)
    and needs the whole proto and its bytes in memory. ``on_tensor(index, count, nbytes)`` is called
    as each of the ``count`` large tensors is about to be written (a progress bar's hook)."""
    path, directory, model_file = _prepare(path)
    pieces, length = _model_pieces(model)
    if length >= 2**31:  # what protobuf refuses to read (and SerializeToString to write)
        raise ValueError(
            f"the model is too large for one ONNX file ({length / 2**30:.2f} GiB, protobuf reads at most 2 GB); "
            "export with external_data=True so the weights are written beside it"
        )
    count = sum(1 for piece in pieces if not isinstance(piece, bytes))
    fd, tmp = _create_temp(directory, suffix=".onnx")
    try:
        with os.fdopen(fd, "wb") as f:
            index = 0
            for piece in pieces:
                if isinstance(piece, bytes):
                    f.write(piece)
                    continue
                tensor, nbytes = piece
                if on_tensor is not None:
                    on_tensor(index, count, nbytes)
                index += 1
                data = tensor.tobytes()
                if len(data) != nbytes:  # the framing written already promised nbytes: never a corrupt file
                    raise RuntimeError(f"internal error: the tensor {tensor.name!r} gave {len(data)} bytes for "
                                       f"its {nbytes} (dtype {tensor.dtype}, shape {tensor.shape})")
                f.write(data)
                del data
            f.flush()
            os.fsync(f.fileno())
        with _folder_lock(directory):
            os.replace(tmp, path)
            _fsync_dir(directory)
            _remove_orphaned_data(directory, model_file, keep=None)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# Protobuf wire format (https://protobuf.dev/programming-guides/encoding/): a length-delimited field
# is its tag (field number << 3 | 2) and its length as varints, then its bytes; fields may come in
# any order. The numbers are read from onnx's descriptors, not written down here.
_GRAPH_FIELD = onnx.ModelProto.DESCRIPTOR.fields_by_name["graph"].number
_INITIALIZER_FIELD = onnx.GraphProto.DESCRIPTOR.fields_by_name["initializer"].number
_RAW_DATA_FIELD = onnx.TensorProto.DESCRIPTOR.fields_by_name["raw_data"].number


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | 0x80 if n else low)
        if not n:
            return bytes(out)


def _framing(field: int, length: int) -> bytes:
    return _varint(field << 3 | 2) + _varint(length)


class _Header:
    """Stands in for a large initializer while the model around it is serialized: what onnx_ir
    writes of a tensor (name, type, dims, doc string, metadata; ``serialize_tensor_into``'s generic
    path) without its bytes, which :func:`save_model_file` writes itself."""

    def __init__(self, tensor: Any) -> None:
        self.name, self.doc_string, self.metadata_props = tensor.name, tensor.doc_string, tensor.metadata_props
        self.dtype, self.shape = tensor.dtype, tensor.shape

    def tobytes(self) -> bytes:
        return b""


def _streamed(tensor: Any) -> bool:
    """Whether a tensor's bytes are written by :func:`save_model_file` (in memory, lazy or on a
    device: anything but strings, references to external files and tensors still in proto form)."""
    kept = (ir.ExternalTensor, ir.StringTensor, ir.TensorProtoTensor)
    return tensor is not None and not isinstance(tensor, kept) and tensor.nbytes > EXTERNAL_THRESHOLD_BYTES


def streamed_bytes(model: ir.Model) -> int:
    """The bytes :func:`save_model_file` writes tensor by tensor (what its ``on_tensor`` counts)."""
    return sum(v.const_value.nbytes for v in model.graph.initializers.values() if _streamed(v.const_value))


def _model_pieces(model: ir.Model) -> tuple[list[bytes | tuple[Any, int]], int]:
    """The model file in pieces, in order: bytes, and ``(tensor, nbytes)`` where a large initializer
    of the main graph has its bytes; and the file's length. The same message as
    ``ir.to_proto(model)`` (fields in another order), which ``onnx.load`` reads back equal to it.

    The model is serialized once with each large initializer's tensor replaced by a
    :class:`_Header` (restored after, whatever happens), so the graph's value infos and its
    initializers' order are onnx_ir's own."""
    graph = model.graph
    swapped = [(value, value.const_value) for value in graph.initializers.values() if _streamed(value.const_value)]
    try:
        for value, tensor in swapped:
            value.const_value = _Header(tensor)
        proto = ir.serde.serialize_model(model)
    finally:
        for value, tensor in swapped:
            value.const_value = tensor
    by_name = {value.name: tensor for value, tensor in swapped}
    initializers: list[tuple[bytes, Any, int]] = []  # (its bytes before the data, tensor or None, data size)
    for init in proto.graph.initializer:
        tensor = by_name.get(init.name)
        if tensor is None:
            initializers.append((init.SerializeToString(), None, 0))
        else:
            init.ClearField("raw_data")  # the stand-in's empty bytes; the tensor's follow the header
            initializers.append((init.SerializeToString() + _framing(_RAW_DATA_FIELD, tensor.nbytes), tensor, tensor.nbytes))
    del proto.graph.initializer[:]
    graph_rest = proto.graph.SerializeToString()
    proto.ClearField("graph")
    graph_length = len(graph_rest) + sum(len(_framing(_INITIALIZER_FIELD, len(b) + n)) + len(b) + n
                                         for b, _, n in initializers)
    pieces: list[bytes | tuple[Any, int]] = [proto.SerializeToString() + _framing(_GRAPH_FIELD, graph_length) + graph_rest]
    for before, tensor, nbytes in initializers:
        framed = _framing(_INITIALIZER_FIELD, len(before) + nbytes) + before
        if isinstance(pieces[-1], bytes):
            pieces[-1] += framed
        else:
            pieces.append(framed)
        if tensor is not None:
            pieces.append((tensor, nbytes))
    length = sum(len(p) if isinstance(p, bytes) else p[1] for p in pieces)
    return pieces, length


__all__ = ["SAVE_STEPS", "clean_stale_temporaries", "save_model_file", "save_with_external_data", "streamed_bytes"]

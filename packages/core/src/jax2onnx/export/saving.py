"""Writing models so that no crash can leave a model beside the wrong weights.

Readers only ever see complete files, and a model with external data is committed as a pair:

1. everything is written into a temp folder beside the target
   (``.jax2onnx-tmp-<host>-<pid>.<start>-<random>``: the owning process, by host (and pid
   namespace) and id and, on Linux, its start time, so a later process given the same id is not
   mistaken for it);
2. the weights file is named after its content (``<model file>.<16 hex>.data``) and moved into
   place first: a name the current model does not reference (or, for the same hash, the same
   bytes), so the old pair stays intact;
3. the model file is moved over the old one (an atomic rename): from here on the new pair is live;
4. weights files of earlier exports of this model are removed.

Killed at any point, the folder holds the old pair or the new pair, plus leftovers (temp folders,
an unreferenced weights file) that the next save into the folder removes: temp entries whose owner
provably ended (:func:`is_abandoned`: a process of this host no longer running, or running with
another start time; this process's own entries that no save of it holds, :func:`claim_temp_token`),
entries whose owner cannot be checked (another host) once a day old, and weights files of this
model's name that its model file does not reference. A disk that fills up mid-save is one clear
error naming the folder, with the partial files removed (:func:`disk_full_error`).

This module needs only the standard library, ``onnx`` and ``onnx_ir`` (a crash test runs it in a
bare subprocess).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import onnx
import onnx_ir as ir

#: Every temp entry this module creates starts with this (older versions used ``.jax2onnx-``).
TEMP_PREFIX = ".jax2onnx-tmp-"
_LEGACY_TEMP_PREFIX = ".jax2onnx-"
#: Temp entries older than this are removed when their owner cannot be checked (another host).
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
    """The host, and on Linux its pid namespace: containers sharing a hostname (``--network host``)
    and a folder have their own pids, so one must not judge another's temp entries by pid."""
    host = re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:24] or "host"
    try:
        namespace = re.sub(r"[^0-9]", "", os.readlink("/proc/self/ns/pid"))
    except OSError:
        return host
    return f"{host}ns{namespace}" if namespace else host


def _process_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks after boot) of a running process, from Linux's ``/proc``;
    None where there is no ``/proc`` or no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()  # after "pid (command)": the command may hold spaces
        return fields[0].decode(), fields[19].decode()
    except (OSError, IndexError, UnicodeDecodeError):
        return None


def _owner() -> str:
    """This process as temp names record it: host, pid and (Linux) start time; read per call, as a
    forked child is another process."""
    pid = os.getpid()
    stat = _process_stat(pid)
    return f"{_host_tag()}-{pid}" + (f".{stat[1]}" if stat else "")


#: The owner part of a temp name: host, pid, optional start time, then the random token.
_OWNER = re.compile(r"(?P<host>[A-Za-z0-9]+)-(?P<pid>[0-9]+)(?:\.(?P<start>[0-9]+))?-(?P<token>[0-9a-f]+)")
#: Tokens of temp entries a save of this process is using (threads export concurrently).
_CLAIMED: set[str] = set()
_CLAIMS_LOCK = threading.Lock()


@contextlib.contextmanager
def claim_temp_token() -> Iterator[str]:
    """A fresh ``<host>-<pid>[.<start>]-<random>`` for naming temp entries (``TEMP_PREFIX + token``;
    a front-end's own prefixes work too), claimed while the block runs: a cleanup in this process
    (another thread's save) leaves entries with it alone, and once the block is left or the process
    ends, :func:`is_abandoned` calls them stale. Leave the block only after removing them."""
    token = f"{_owner()}-{uuid.uuid4().hex[:12]}"
    with _CLAIMS_LOCK:
        _CLAIMED.add(token)
    try:
        yield token
    finally:
        with _CLAIMS_LOCK:
            _CLAIMED.discard(token)


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


def _owner_ended(token: str) -> bool | None:
    """Whether the process that made a temp entry named with ``token`` (what follows its prefix)
    has ended: True or False where that can be proven, None where not (another host, an
    unparsable name, a live pid whose start time is unknown)."""
    m = _OWNER.match(token)
    if m is None or m["host"] != _host_tag():
        return None
    pid, start = int(m["pid"]), m["start"]
    if pid == os.getpid():
        own = _process_stat(pid)
        if start is not None and own is not None and own[1] != start:
            return True  # an earlier process with this pid (a container runs each command as the same pid)
        with _CLAIMS_LOCK:
            return m.group(0) not in _CLAIMED  # this process's own entry: live while a save claims it
    if not _pid_alive(pid):
        return True
    stat = _process_stat(pid)
    if stat is None:
        return None  # alive, or no /proc to tell (macOS, Windows): the age rule decides
    if stat[0] in ("Z", "X"):  # exited, not yet reaped by its parent
        return True
    if start is not None:
        return stat[1] != start  # another process now has the pid
    return None


def is_abandoned(path: str | os.PathLike[str], token: str, now: float | None = None) -> bool:
    """A temp entry at ``path`` named with ``token`` (the text after its prefix) is stale: its
    owner provably ended, or cannot be checked and the entry is older than :data:`STALE_SECONDS`.
    Never true of an entry a running save (of any process on this host) is using."""
    ended = _owner_ended(token)
    if ended is not None:
        return ended
    try:
        age = (time.time() if now is None else now) - os.lstat(path).st_mtime
    except OSError:
        return False
    return age > STALE_SECONDS


def _is_stale(directory: str, name: str, now: float) -> bool:
    path = os.path.join(directory, name)
    if name.startswith(TEMP_PREFIX):
        return is_abandoned(path, name[len(TEMP_PREFIX) :], now)
    try:  # an earlier version's temp entry: by age alone
        return now - os.lstat(path).st_mtime > STALE_SECONDS
    except OSError:
        return False


def remove_entry(path: str) -> bool:
    """Remove a file or folder tree (a link as itself); False when it was not there to remove
    (another process cleaning the same folder got there first)."""
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError:
        return False
    return True


#: errno values of a write that found no room: a full disk, an exhausted quota.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)})
#: numpy's ``tofile`` (onnx_ir writes the weights with it) reports a full disk as a short write, with no errno.
_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")


def disk_full_error(exc: BaseException, directory: str | os.PathLike[str], what: str) -> OSError | None:
    """For a write that ran out of space while writing ``what`` into ``directory`` (``ENOSPC``,
    ``EDQUOT``, or numpy's short write): an ``OSError`` (errno ``ENOSPC`` unless the quota's)
    saying so, where, and the fix; call it after the partial files are removed, as it reports the
    space then free. None for any other error."""
    if not isinstance(exc, OSError):
        return None
    if exc.errno in DISK_FULL_ERRNOS:
        code = exc.errno
        reason = "the disk is full" if code == errno.ENOSPC else "the disk quota is exhausted"
        detail = os.strerror(code)
    elif exc.errno is None and _SHORT_WRITE.fullmatch(str(exc)):
        code, reason = errno.ENOSPC, "the disk is full (or a quota or file-size limit was reached)"
        detail = f"a write stopped short: {exc}"
    else:
        return None
    directory = os.fspath(directory)
    try:
        free = f"{shutil.disk_usage(directory).free / 2**20:.1f} MiB are free there now"
    except OSError:
        free = "its free space could not be read"
    return OSError(code, f"{reason}: writing {what} into {directory} failed ({detail}); the partial files were "
                         f"removed and {free}. Free space on that disk (or raise the quota), or write to a folder on "
                         "another disk")


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
        if name.startswith(_LEGACY_TEMP_PREFIX) and _is_stale(directory, name, now) and \
                remove_entry(os.path.join(directory, name)):
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
def folder_lock(directory: str | os.PathLike[str]) -> Any:
    """Serialise the commit step of saves into one folder (across processes, where ``flock``
    exists): one save's cleanup must not delete the weights another save just moved in."""
    try:
        import fcntl
    except ImportError:  # Windows: renames still keep each pair consistent, cleanup may race
        yield
        return
    fd = None
    try:
        fd = os.open(os.fspath(directory), os.O_RDONLY)
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
    try:
        with claim_temp_token() as token:
            temp_dir = os.path.join(directory, TEMP_PREFIX + token)
            os.mkdir(temp_dir)
            try:
                data_file = _write_pair(model, temp_dir, path, data_file, on_tensor)
            finally:
                shutil.rmtree(temp_dir, ignore_errors=True)
    except OSError as exc:
        full = disk_full_error(exc, directory, f"{model_file} and its weights")
        if full is None:
            raise
        raise full from exc
    _step("done")
    return onnx.load(path, load_external_data=False)


def _write_pair(model: ir.Model, temp_dir: str, path: str, data_file: str | None,
                on_tensor: Callable[[int, int, int], None] | None) -> str:
    """The steps of :func:`save_with_external_data` after the temp folder is made; returns the
    weights file's name."""
    directory, model_file = os.path.split(path)
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
    with folder_lock(directory):
        os.replace(temp_data, os.path.join(directory, data_file))
        _fsync_dir(directory)
        _step("data-committed")
        os.replace(temp_model, path)
        _fsync_dir(directory)
        _step("model-committed")
        _remove_orphaned_data(directory, model_file, keep=data_file)
    return data_file


def _create_temp(directory: str, token: str, suffix: str) -> tuple[int, str]:
    """A new temp file like ``mkstemp``'s, but created with mode 0666 so the umask applies and the
    renamed model gets the mode any new file gets (mkstemp's 0600 survived the rename)."""
    tmp = os.path.join(directory, f"{TEMP_PREFIX}{token}{suffix}")  # unique: host, pid, random
    return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), tmp


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
    try:
        with claim_temp_token() as token:
            fd, tmp = _create_temp(directory, token, suffix=".onnx")
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
                _step("temp-written")
                with folder_lock(directory):
                    os.replace(tmp, path)
                    _fsync_dir(directory)
                    _remove_orphaned_data(directory, model_file, keep=None)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
    except OSError as exc:
        full = disk_full_error(exc, directory, model_file)
        if full is None:
            raise
        raise full from exc


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


__all__ = ["SAVE_STEPS", "TEMP_PREFIX", "claim_temp_token", "clean_stale_temporaries", "disk_full_error", "folder_lock",
           "is_abandoned", "remove_entry", "save_model_file", "save_with_external_data", "streamed_bytes"]

"""JAX's outputs on a testcase's inputs, computed once for every variant that compares on them.

JAX's side of a comparison (a jit: trace, lowering, an XLA compilation) is most of what a small
testcase costs. The opsets of one variant already share it (:func:`jax2onnx.testing.run_variant`);
a static variant and the symbolic one of the same testcase and precision share it too: the static
variant's inputs are the symbolic variant's trial at the same sizes (:func:`.runner.variant_inputs`),
so JAX computes the same function on the same arrays for both.

Outputs are found by what they depend on, never by a test's name: the testcase (pack, component,
name), float64 or not, whether the reference is jitted, the JAX settings a trace reads that an
export does not fix (:func:`jax2onnx.compat.trace_flags`: x64, the threefry mode) and the default
matmul precision, and the bytes, dtypes and shapes of every input and parameter. A testcase whose
``build()`` is not deterministic would compare one variant's export with another's function and
fail, never pass by it.

Within a process the last few are kept; across pytest-xdist workers (the static and the symbolic
variant may run in different ones) they go through the folder :data:`FOLDER_VARIABLE` names, which
the pytest plugin makes for the session: written whole under another name first, so a worker reads a
complete file or none (and computes it itself then).
"""

from __future__ import annotations

import collections
import hashlib
import os
import pickle
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from ..compat import trace_flags

#: the environment variable naming the folder the session's processes share outputs through
FOLDER_VARIABLE = "JAX2ONNX_TESTCASE_REFERENCES"
#: outputs kept in this process (a testcase's variants run one after another)
KEPT = 16
#: outputs larger than this (bytes) are not written to the folder (a sampler's 10**5 draws)
MAX_SHARED_BYTES = 1 << 20

_recent: collections.OrderedDict[tuple[str, int], tuple[Any, Any]] = collections.OrderedDict()


def reference_key(variant: Any, arrays: Sequence[Any], params: Mapping[str, Any] | None) -> str:
    """What JAX's outputs for ``variant``'s testcase on ``arrays`` and ``params`` depend on, hashed."""
    case = variant.case
    digest = hashlib.sha256(repr((
        variant.pack, variant.component, case.name, variant.double, case.reference_jit, trace_flags(),
        str(jax.config.jax_default_matmul_precision), sorted((params or {}).keys()),
    )).encode())
    for a in [*arrays, *(v for _, v in sorted((params or {}).items()))]:
        arr = np.asarray(a)
        digest.update(f"{arr.dtype.str}{arr.shape}".encode())
        digest.update(np.ascontiguousarray(arr).tobytes())
    return digest.hexdigest()


def shared_reference(key: str, compute: Callable[[], Any], variant: Any = None) -> Any:
    """``compute()``'s value for ``key``: this process's, another worker's from the session folder,
    else computed now (and kept, and written there).

    ``variant``: whose outputs they are. In this process they serve only variants of the same
    testcase object (a test may build two testcases of one name around different functions); the
    folder serves only a pack's registered testcases (pack and component named: one testcase per
    name there)."""
    case = getattr(variant, "case", None)
    mine = (key, id(case))
    if mine in _recent:
        _recent.move_to_end(mine)
        return _recent[mine][1]
    folder = os.environ.get(FOLDER_VARIABLE)
    registered = variant is None or (variant.pack and variant.component)
    path = os.path.join(folder, key + ".pickle") if folder and registered else None
    value = None
    if path is not None and os.path.exists(path):
        try:
            with open(path, "rb") as f:
                value = pickle.load(f)
        except (OSError, pickle.UnpicklingError, EOFError):
            value = None  # unreadable (a folder removed under us): compute it here
    if value is None:
        value = compute()
        if path is not None and _nbytes(value) <= MAX_SHARED_BYTES:
            _write(path, folder, value)
    _recent[mine] = (case, value)  # the case held: its id is not reused while the entry lives
    while len(_recent) > KEPT:
        _recent.popitem(last=False)
    return value


def _nbytes(value: Any) -> int:
    outputs = value[0] if isinstance(value, tuple) else value
    return sum(np.asarray(o).nbytes for o in outputs)


def _write(path: str, folder: str, value: Any) -> None:
    try:
        fd, partial = tempfile.mkstemp(dir=folder, suffix=".partial")
    except OSError:  # the folder is gone: not shared, each worker computes its own
        return
    try:
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f)
        os.replace(partial, path)
    except Exception:  # noqa: BLE001 - an output pickle cannot write is only not shared
        if os.path.exists(partial):
            os.remove(partial)


__all__ = ["FOLDER_VARIABLE", "reference_key", "shared_reference"]

"""A test fixture's expensive value (an export, a trained model) made once per pytest session.

pytest-xdist spreads a module's tests over its workers, so a module-scoped fixture is set up in
each worker: two exports of the same model, two trainings of the same tiny LM. :func:`built_once`
lets the first worker build while a file lock holds the others, which then read its result back.
"""

from __future__ import annotations

import atexit
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

try:
    import fcntl
except ImportError:  # Windows: no flock, each process builds its own
    fcntl = None

T = TypeVar("T")


def xdist_session_folder(tmp_path_factory: Any) -> Path | None:
    """The temporary folder every xdist worker of this session shares (the parent of each worker's
    ``basetemp``), or None outside xdist: there the parent is pytest's folder of earlier sessions."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return None
    return Path(tmp_path_factory.getbasetemp()).parent


def built_once(name: str, build: Callable[[Path], T], folder: str | os.PathLike[str] | None) -> tuple[Path, T]:
    """``build(root) -> value`` made once per session for ``name``, answered as ``(root, value)``:
    ``root`` an empty folder ``build`` may write into (an export), ``value`` what it returns
    (picklable: tokens, inputs, arrays). The first process to ask builds into a scratch folder under
    ``folder`` (a folder the session's processes share) and renames it whole into place while a
    file lock holds the others, which then read the folder and the value back. A build that raises
    leaves nothing, and the next process to ask builds again. Without ``folder`` (one process) or
    without ``fcntl``, each process builds its own. What ``build`` makes must not depend on the
    process (a deterministic export, a seeded training): every worker then tests the same thing.
    Tests must not write into ``root`` (a test that breaks an export copies it first)."""
    if not folder or fcntl is None:
        root = Path(tempfile.mkdtemp(prefix=f"jax2onnx-{name}-"))
        atexit.register(shutil.rmtree, root, True)  # the session's temporary folders go too
        return root, build(root)
    done = Path(folder) / f"built-{name}"
    with open(f"{done}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, also when build raises
        if not done.exists():
            scratch = Path(tempfile.mkdtemp(dir=folder, suffix=".partial"))
            try:
                (scratch / "out").mkdir()
                value = build(scratch / "out")
                with open(scratch / "value.pickle", "wb") as f:
                    pickle.dump(value, f)
                os.replace(scratch, done)
            except BaseException:
                shutil.rmtree(scratch, ignore_errors=True)
                raise
    with open(done / "value.pickle", "rb") as f:
        return done / "out", pickle.load(f)


__all__ = ["built_once", "xdist_session_folder"]

"""What a ``--jax2onnx-report`` file records beside the outcomes: the versions they were produced
with. The pytest plugin writes it, ``jax2onnx coverage`` (``cli/coverage.py``) prints it in the
tables' legend; it lives here, below both, so the CLI reads what the testing stage writes without
the two importing each other."""

from __future__ import annotations

import importlib.metadata as metadata
import platform

#: The report's entry naming the versions its outcomes were produced with (the tables print it).
ENVIRONMENT_KEY = "__environment__"
_VERSIONED = ("jax", "jaxlib", "flax", "equinox", "keras", "onnx", "onnx-ir", "onnxruntime", "numpy")


def environment() -> dict[str, str]:
    """Python's and the installed versions of what a test outcome depends on."""
    out = {"python": platform.python_version()}
    for dist in _VERSIONED:
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return out

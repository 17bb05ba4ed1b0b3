import os
import shutil
import sys
import tempfile

os.environ.setdefault("KERAS_BACKEND", "jax")
sys.path.insert(0, os.path.dirname(__file__))  # llm_test_helpers

from llm_test_helpers import REFERENCE_DIR  # noqa: E402

_made_reference_dir = None


def pytest_configure(config):
    """One folder of library reference tokens for the session (llm_test_helpers.remembered), made by
    the process that starts first (xdist's controller: its workers inherit the variable)."""
    global _made_reference_dir
    if not os.environ.get(REFERENCE_DIR):
        _made_reference_dir = os.environ[REFERENCE_DIR] = tempfile.mkdtemp(prefix="jax2onnx-llm-reference-")


def pytest_unconfigure(config):
    if _made_reference_dir is not None:
        shutil.rmtree(_made_reference_dir, ignore_errors=True)
        os.environ.pop(REFERENCE_DIR, None)


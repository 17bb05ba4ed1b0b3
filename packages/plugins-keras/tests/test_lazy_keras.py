"""The pack is loaded for every export; it must not import Keras (seconds, and on another backend it
may not import at all) for a program that never did."""

import subprocess
import sys

CODE = """
import sys
import jax.numpy as jnp
from jax2onnx import to_onnx
from jax2onnx.lower.registry import get_registry
to_onnx(lambda x: jnp.sin(x) * 2.0, [("B", 3)])
assert any(p.name == "jax2onnx-keras" and p.error is None for p in get_registry().packs), get_registry().packs
assert "keras" not in sys.modules, "an export imported keras"
print("ok")
"""


def test_an_export_without_keras_does_not_import_it():
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stderr[-2000:]

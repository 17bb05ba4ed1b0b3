"""The fallback package (packages/core/fallback, docs/architecture.md "Distributions") takes over
exactly when ``site-packages/jax2onnx/__init__.py`` is gone, as uninstalling jax2onnx 0.17 leaves
it, and is never used while that file exists. Laid out here as core's wheel installs it, in a
scratch site folder, imported by a separate interpreter."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

CORE = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
pytestmark = pytest.mark.skipif(not os.path.isdir(os.path.join(CORE, "fallback")), reason="needs the source checkout")

PROBE = """
import json, os, site, sys
site.addsitedir(os.environ["SITE"])            # processes jax2onnx_core_fallback.pth, as site-packages does
sys.path.extend(json.loads(os.environ["INHERITED"]))  # jax, onnx, ... after it, as in site-packages
import numpy as np
import jax2onnx, jax2onnx.export.conversion
sys.path.insert(0, os.environ["MINI_PACK_DIR"])
from mini_pack import MiniPack, registry_in_use
with registry_in_use(("jax2onnx-mini", MiniPack())):  # core lowers nothing itself: the test-only pack lowers `*`
    model = jax2onnx.to_onnx(lambda x: x * 2.0, [("B", 3)])
print(json.dumps({"init": jax2onnx.__file__, "conversion": jax2onnx.export.conversion.__file__,
                  "nodes": [n.op_type for n in model.graph.node], "all": sorted(jax2onnx.__all__)}))
"""


def _site(tmp_path, with_init: bool):
    site = tmp_path / "site-packages"
    shutil.copytree(os.path.join(CORE, "src", "jax2onnx"), site / "jax2onnx",
                    ignore=shutil.ignore_patterns("__pycache__"))
    if not with_init:
        (site / "jax2onnx" / "__init__.py").unlink()  # what the 0.17 uninstall does
    fallback = site / "_jax2onnx_core_fallback" / "jax2onnx"
    fallback.mkdir(parents=True)
    shutil.copyfile(os.path.join(CORE, "fallback", "__init__.py"), fallback / "__init__.py")
    shutil.copyfile(os.path.join(CORE, "src", "jax2onnx", "__init__.py"), fallback / "_init_body.py")  # hatch_build.py
    shutil.copyfile(os.path.join(CORE, "fallback", "jax2onnx_core_fallback.pth"), site / "jax2onnx_core_fallback.pth")
    return site


def _probe(site):
    # This interpreter's path entries come after the scratch site and its fallback, as packages
    # installed beside jax2onnx do; a jax2onnx among them (the checkout's, an install's) is never reached.
    inherited = [p for p in sys.path if p]
    env = {**os.environ, "SITE": str(site), "INHERITED": json.dumps(inherited), "JAX_PLATFORMS": "cpu",
           "MINI_PACK_DIR": os.path.dirname(os.path.abspath(__file__))}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([sys.executable, "-S", "-c", PROBE], capture_output=True, text=True, env=env, cwd=str(site.parent))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_without_init_the_fallback_is_jax2onnx(tmp_path):
    site = _site(tmp_path, with_init=False)
    got = _probe(site)
    assert got["init"] == str(site / "_jax2onnx_core_fallback" / "jax2onnx" / "__init__.py")
    assert got["conversion"] == str(site / "jax2onnx" / "export" / "conversion.py")  # the real folder's modules
    assert got["nodes"] == ["Mul"]
    import jax2onnx

    assert got["all"] == sorted(jax2onnx.__all__)  # the same public API


def test_with_init_the_fallback_is_never_used(tmp_path):
    site = _site(tmp_path, with_init=True)
    got = _probe(site)
    assert got["init"] == str(site / "jax2onnx" / "__init__.py")

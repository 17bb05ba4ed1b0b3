"""Wheel build hook: the fallback ``jax2onnx`` package (fallback/__init__.py says why) and the
``.pth`` that puts it on ``sys.path``, with core's ``jax2onnx/__init__.py`` shipped a second time
as its ``_init_body.py``. That copy is made at build time, so the wheel keeps the file at its own
path too (hatch's static force-include would move it) and no second copy lives in the source tree
to drift. Editable installs get none of it: they import the source folder."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

BODY = "_jax2onnx_core_fallback/jax2onnx/_init_body.py"


class FallbackInitHook(BuildHookInterface):
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel" or version == "editable":
            return
        self._tmp = tempfile.mkdtemp(prefix="jax2onnx-core-build-")
        copy = os.path.join(self._tmp, "_init_body.py")
        shutil.copyfile(os.path.join(self.root, "src", "jax2onnx", "__init__.py"), copy)
        build_data["force_include"][copy] = BODY
        fallback = os.path.join(self.root, "fallback")
        build_data["force_include"][os.path.join(fallback, "__init__.py")] = "_jax2onnx_core_fallback/jax2onnx/__init__.py"
        build_data["force_include"][os.path.join(fallback, "jax2onnx_core_fallback.pth")] = "jax2onnx_core_fallback.pth"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

"""A plain export (no verify) loads no onnxruntime and writes nothing outside its output file.

onnxruntime, once imported, writes files of its own (``~/.cache/Microsoft/DeveloperTools/...``,
``$TMPDIR/.ses``) and costs start-up time; the kernel table's onnxruntime version is read from
package metadata instead. The cases run in one fresh interpreter whose ``HOME`` and ``TMPDIR`` are
empty folders, and check after each export that both stay empty and ``onnxruntime`` was never imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))

_EXPORT = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, {tests!r})
    import jax.numpy as jnp
    import onnx
    from jax2onnx import to_onnx

    def fn(x, y):
        return jnp.sin(x) * y + jnp.cos(x)

    def files_under(folder):
        return sorted(os.path.relpath(os.path.join(d, f), folder) for d, dirs, files in os.walk(folder)
                      for f in files + dirs)

    for packs in ("mini", "installed"):
        os.chdir(os.path.join({out!r}, packs))  # the working folder is the output's: a stray file shows there
        output = os.path.join(os.getcwd(), "model.onnx")
        if packs == "mini":
            from mini_pack import MiniPack, registry_in_use
            ctx = registry_in_use(("jax2onnx-mini", MiniPack()))
        else:
            import contextlib
            from jax2onnx.lower.registry import get_registry
            if not {{"sin", "cos", "mul", "add"}} <= set(get_registry().lowerings()):
                print(json.dumps({{packs: "SKIP: no installed pack lowers sin/cos/mul/add"}}))
                continue
            ctx = contextlib.nullcontext()
        with ctx:
            to_onnx(fn, [("B", 3), ("B", 3)], output_path=output)
        onnx.checker.check_model(onnx.load(output), full_check=True)
        # the state after this export (and the one before it, whose checks are the same)
        print(json.dumps({{packs: {{"onnxruntime": "onnxruntime" in sys.modules, "home": files_under({home!r}),
                                   "tmp": files_under({tmp!r}), "out": files_under(os.path.dirname(output))}}}}))
""")


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict:
    """Both cases' exports (the test-only mini pack's registry, then the installed packs') in one
    fresh interpreter (each fresh one importing jax costs seconds of CPU), each checked right after it
    ran. HOME, TMPDIR and the output folders are empty folders of their own."""
    tmp_path = tmp_path_factory.mktemp("side_effects")
    home, tmp, out_dir = tmp_path / "home", tmp_path / "tmp", tmp_path / "out"
    for d in (home, tmp, out_dir / "mini", out_dir / "installed"):
        d.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "JAX2ONNX_CACHE_DIR")}
    env.update(HOME=str(home), TMPDIR=str(tmp), JAX_PLATFORMS="cpu")
    code = _EXPORT.format(tests=TESTS, out=str(out_dir), home=str(home), tmp=str(tmp))
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(out_dir), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    states: dict = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            states.update(json.loads(line))
    return states


@pytest.mark.parametrize("packs", ["mini", "installed"])
def test_a_plain_export_imports_no_onnxruntime_and_writes_only_its_output(exports, packs):
    state = exports[packs]
    if isinstance(state, str):
        pytest.skip(state)
    assert state["onnxruntime"] is False, "the export imported onnxruntime"
    assert state["home"] == [], "the export wrote into HOME"
    assert state["tmp"] == [], "the export wrote into TMPDIR"
    assert state["out"] == ["model.onnx"]

"""A plain export (no verify) loads no onnxruntime and writes nothing outside its output file.

onnxruntime, once imported, writes files of its own (``~/.cache/Microsoft/DeveloperTools/...``,
``$TMPDIR/.ses``) and costs start-up time; the kernel table's onnxruntime version is read from
package metadata instead. Each case runs in a fresh interpreter whose ``HOME`` and ``TMPDIR`` are
empty folders, and checks both stay empty and ``onnxruntime`` was never imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))

_EXPORT = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import jax.numpy as jnp
    import onnx
    from jax2onnx import to_onnx

    def fn(x, y):
        return jnp.sin(x) * y + jnp.cos(x)

    if {packs!r} == "mini":
        from mini_pack import MiniPack, registry_in_use
        ctx = registry_in_use(("jax2onnx-mini", MiniPack()))
    else:
        import contextlib
        from jax2onnx.lower.registry import get_registry
        if not {{"sin", "cos", "mul", "add"}} <= set(get_registry().lowerings()):
            print("SKIP: no installed pack lowers sin/cos/mul/add")
            sys.exit(0)
        ctx = contextlib.nullcontext()
    with ctx:
        to_onnx(fn, [("B", 3), ("B", 3)], output_path={output!r})
    onnx.checker.check_model(onnx.load({output!r}), full_check=True)
    print("onnxruntime imported:", "onnxruntime" in sys.modules)
""")


def _files_under(folder: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), folder) for d, dirs, files in os.walk(folder) for f in files + dirs)


@pytest.mark.parametrize("packs", ["mini", "installed"])
def test_a_plain_export_imports_no_onnxruntime_and_writes_only_its_output(tmp_path, packs):
    home, tmp, out_dir = tmp_path / "home", tmp_path / "tmp", tmp_path / "out"
    for d in (home, tmp, out_dir):
        d.mkdir()
    output = str(out_dir / "model.onnx")
    env = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME", "JAX2ONNX_CACHE_DIR")}
    env.update(HOME=str(home), TMPDIR=str(tmp), JAX_PLATFORMS="cpu")
    code = _EXPORT.format(tests=TESTS, packs=packs, output=output)
    done = subprocess.run([sys.executable, "-c", code], env=env, cwd=str(out_dir), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    if done.stdout.startswith("SKIP"):
        pytest.skip(done.stdout.strip())
    assert "onnxruntime imported: False" in done.stdout, done.stdout
    assert _files_under(str(home)) == [], "the export wrote into HOME"
    assert _files_under(str(tmp)) == [], "the export wrote into TMPDIR"
    assert _files_under(str(out_dir)) == ["model.onnx"]

"""Every package's README (its PyPI page) runs as written: each page's ```python blocks in order in
one namespace, in a fresh empty folder, and every .onnx file they write passes the full checker.

The root README is tests/test_readme.py's, the guide pages tests/test_guide.py's. A page whose
blocks use the template pack (``jax2onnx_mypack``) needs that pack installed (``nox -s tests``
installs it); the test environment has every other pack, as each page's install line asks.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re

import onnx
import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", flags=re.S | re.M)
PAGES = sorted(os.path.relpath(p, ROOT) for p in [*glob.glob(os.path.join(ROOT, "packages", "*", "README.md")),
                                                   os.path.join(ROOT, "templates", "plugin-pack", "README.md")])


def keras_calls_jax2onnx() -> bool:
    """Keras' ``model.export(format="onnx")`` calls jax2onnx from Keras 3.14 on (before: tf2onnx)."""
    import keras

    return tuple(int(p) for p in keras.__version__.split(".")[:2]) >= (3, 14)


def python_blocks(page: str) -> list[tuple[int, str]]:
    """(first line number, code) of each ```python block of ``page``."""
    with open(os.path.join(ROOT, page), encoding="utf-8") as f:
        text = f.read()
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


def test_pack_readmes_have_examples():
    with_code = [p for p in PAGES if python_blocks(p)]
    # every pack but the lax/jnp-only bash pages shows Python; a page losing its example fails here
    assert len(with_code) >= 7, with_code


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)])
def test_readme_runs_as_written(page, tmp_path, monkeypatch):
    blocks = python_blocks(page)
    if any("jax2onnx_mypack" in code for _, code in blocks) and importlib.util.find_spec("jax2onnx_mypack") is None:
        pytest.skip("the template pack (templates/plugin-pack) is not installed here; nox -s tests installs it")
    if any('format="onnx"' in code for _, code in blocks) and not keras_calls_jax2onnx():
        pytest.skip("Keras < 3.14 exports ONNX through tf2onnx (TensorFlow), not jax2onnx: the floor cell's Keras")
    monkeypatch.chdir(tmp_path)  # a fresh empty folder: files a block writes land here
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    namespace: dict = {"__name__": "__readme__"}
    for line, code in blocks:
        # Padding puts the block's lines at their line numbers in the page, for tracebacks.
        exec(compile("\n" * (line - 1) + code, page, "exec"), namespace)  # noqa: S102
    for path in tmp_path.rglob("*.onnx"):
        onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    if any(tmp_path.rglob("genai_config.json")):  # an LLM folder: onnxruntime-genai loads and runs it as written
        pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai runs the LLM folders the page writes")
        from jax2onnx_llm.genai_run import check_folders_run

        check_folders_run(tmp_path)

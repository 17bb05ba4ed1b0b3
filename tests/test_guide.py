"""The user guide's code (docs/guide/*.md) runs as written.

Each page's ```python blocks run in order in one namespace (a page builds its example step by
step), in a fresh scratch folder, with line numbers pointing into the page. A block that is only
a snippet include (``--8<-- "templates/plugin-pack/..."``, rendered by mkdocs) shows a file of the
template pack, whose own tests run it; here the included file must exist. A page whose blocks use
the template pack (``jax2onnx_mypack``) is skipped where that pack is not installed (only
``nox -s tests`` installs it). A block whose first line is ``# TPU only`` runs only where JAX's
default backend is a TPU (the accelerators page: ``pytest tests/test_guide.py -k accelerators`` on
a TPU host runs it); elsewhere it is left out, so later blocks must not need it.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import re

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")
GUIDE = os.path.join(ROOT, "docs", "guide")
_BLOCK = re.compile(r"^```python[^\n]*\n(.*?)^```", flags=re.S | re.M)
_SNIPPET = re.compile(r'^--8<-- "([^"]+)"$')
#: The first line of a block that needs a TPU.
TPU_ONLY = "# TPU only"


def python_blocks(page: str) -> list[tuple[int, str]]:
    """(first line number, code) of each ```python block of ``page``."""
    with open(os.path.join(GUIDE, page), encoding="utf-8") as f:
        text = f.read()
    return [(text.count("\n", 0, m.start(1)) + 1, m.group(1)) for m in _BLOCK.finditer(text)]


ALL_PAGES = sorted(os.path.basename(p) for p in glob.glob(os.path.join(GUIDE, "*.md")))
#: The pages with code (the API reference page is generated from docstrings and has none).
PAGES = [p for p in ALL_PAGES if python_blocks(p)]


def test_the_guide_has_pages_with_code():
    assert len(ALL_PAGES) >= 11 and len(PAGES) >= 10
    assert sum(len(python_blocks(p)) for p in PAGES) >= 20


@pytest.mark.parametrize("page", PAGES)
def test_guide_page_runs(page, tmp_path, monkeypatch):
    blocks = python_blocks(page)
    code_blocks = []
    for line, code in blocks:
        include = _SNIPPET.match(code.strip())
        if include:
            assert os.path.isfile(os.path.join(ROOT, include.group(1))), f"{page}:{line}: {include.group(1)} is missing"
        else:
            code_blocks.append((line, code))
    if any("jax2onnx_mypack" in code for _, code in code_blocks) and importlib.util.find_spec("jax2onnx_mypack") is None:
        pytest.skip("the template pack (templates/plugin-pack) is not installed here; nox -s tests installs it")
    imports_keras_hub = re.compile(r"^\s*(import|from) keras_hub\b", re.M)
    if any(imports_keras_hub.search(code) for _, code in code_blocks) and importlib.util.find_spec("keras_hub") is None:
        # the floor cell installs no KerasHub (nox -s tests and tests_llm do)
        pytest.skip("the page exports a KerasHub model and keras-hub is not installed here; nox -s tests installs it")
    if any(code.startswith(TPU_ONLY) for _, code in code_blocks):
        import jax

        if jax.default_backend() != "tpu":
            code_blocks = [(line, code) for line, code in code_blocks if not code.startswith(TPU_ONLY)]
    monkeypatch.chdir(tmp_path)  # a fresh folder: files a block writes land here
    namespace: dict = {"__name__": "__guide__"}
    for line, code in code_blocks:
        # Padding puts the block's lines at their line numbers in the page, for tracebacks.
        exec(compile("\n" * (line - 1) + code, f"docs/guide/{page}", "exec"), namespace)  # noqa: S102
    if any(tmp_path.rglob("genai_config.json")):  # an LLM folder: onnxruntime-genai loads and runs it as written
        pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai runs the LLM folders the page writes")
        from jax2onnx_llm.genai_run import check_folders_run

        check_folders_run(tmp_path)


def test_every_guide_page_is_in_the_site_nav():
    with open(os.path.join(ROOT, "mkdocs.yml"), encoding="utf-8") as f:
        config = f.read()
    missing = [p for p in ALL_PAGES if f"guide/{p}" not in config]
    assert not missing, f"add these pages to mkdocs.yml's nav: {missing}"

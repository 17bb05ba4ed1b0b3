"""The README's code blocks run as written (in a scratch directory), and their models are right."""

from __future__ import annotations

import os
import re

import numpy as np
import onnx
import pytest

README = os.path.join(os.path.dirname(__file__), "..", "README.md")


def _python_blocks() -> list[str]:
    with open(README, encoding="utf-8") as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_has_the_two_seed_examples():
    blocks = _python_blocks()
    assert any("to_onnx(my_callable" in b for b in blocks)
    assert any("@onnx_function" in b for b in blocks)


def test_readme_shows_every_pack():
    """Each pack of packages/ has a one-line example in the root README (a block opening with
    ``# <distribution>:``), which test_readme_block_runs runs: a new pack joins without a list."""
    import glob
    import tomllib

    root = os.path.dirname(README)
    blocks = _python_blocks()
    checked = []
    for path in glob.glob(os.path.join(root, "packages", "*", "pyproject.toml")):
        with open(path, "rb") as f:
            name = tomllib.load(f)["project"]["name"]
        if name in ("jax2onnx-core", "jax2onnx"):  # the converter itself, and the meta package
            continue
        if name in ("jax2onnx-lax", "jax2onnx-jnp"):  # every example uses them (plain JAX functions)
            continue
        assert any(b.startswith(f"# {name}:") for b in blocks), f"the README has no example for {name}"
        checked.append(name)
    assert "jax2onnx-nnx" in checked, checked  # the glob found the packs: else this checked nothing


#: The distribution each top-level module of the README's LLM example comes from.
_LLM_EXAMPLE_DISTRIBUTIONS = {"jax2onnx_llm": "jax2onnx-llm", "onnxruntime_genai": "onnxruntime-genai",
                              "transformers": "transformers"}


def _extra_closure(name: str, extras: set[str], projects: dict[str, dict]) -> set[str]:
    """Every distribution ``name[extras]`` installs, following the repository's own packages' extras
    (third-party ones are leaves)."""
    from packaging.requirements import Requirement

    found = {name}
    project = projects.get(name)
    if project is None:
        return found
    reqs = list(project.get("dependencies", []))
    reqs += [r for extra in extras for r in project.get("optional-dependencies", {}).get(extra, [])]
    for text in reqs:
        req = Requirement(text)
        found |= _extra_closure(req.name, set(req.extras), projects) if req.name != name else set()
    return found


def test_readme_installs_the_llm_path_its_example_imports():
    """Issue #46: the README's install lines include the LLM path, and ``jax2onnx[llm]`` installs every
    library the README's LLM example imports (onnxruntime-genai and transformers too, not only the pack)."""
    import ast
    import glob
    import tomllib

    with open(README, encoding="utf-8") as f:
        install = f.read().split("## Install", 1)[1].split("\n## ", 1)[0]
    assert "pip install 'jax2onnx[llm]'" in install
    projects = {}
    for path in glob.glob(os.path.join(os.path.dirname(README), "packages", "*", "pyproject.toml")):
        with open(path, "rb") as f:
            project = tomllib.load(f)["project"]
        projects[project["name"]] = project
    installed = _extra_closure("jax2onnx", {"llm"}, projects)
    (block,) = [b for b in _python_blocks() if b.startswith("# jax2onnx-llm:")]
    modules = {a.name.split(".")[0] for node in ast.walk(ast.parse(block)) if isinstance(node, ast.Import) for a in node.names}
    modules |= {node.module.split(".")[0] for node in ast.walk(ast.parse(block)) if isinstance(node, ast.ImportFrom)}
    assert modules == set(_LLM_EXAMPLE_DISTRIBUTIONS), modules  # the table still fits the example
    missing = {m: d for m, d in _LLM_EXAMPLE_DISTRIBUTIONS.items() if d not in installed}
    assert not missing, f"pip install 'jax2onnx[llm]' installs {sorted(installed)}, not {missing}"


def test_readme_commands_come_first():
    with open(README, encoding="utf-8") as f:
        head = f.read().split("---")[0]
    assert "jax2onnx_examples.quickstart" in head and "nox -s tests" in head


@pytest.mark.parametrize("index", range(len(_python_blocks())))
def test_readme_block_runs(index, tmp_path, monkeypatch):
    import keras

    keras_calls_jax2onnx = tuple(int(p) for p in keras.__version__.split(".")[:2]) >= (3, 14)
    if 'format="onnx"' in _python_blocks()[index] and not keras_calls_jax2onnx:
        pytest.skip("Keras < 3.14 exports ONNX through tf2onnx (TensorFlow), not jax2onnx: the floor cell's Keras")
    monkeypatch.chdir(tmp_path)  # a fresh folder: a block may not rely on folders that are not there
    monkeypatch.setenv("KERAS_BACKEND", "jax")
    namespace: dict = {"__name__": "__readme__"}
    exec(compile(_python_blocks()[index], f"README.md[block {index}]", "exec"), namespace)  # noqa: S102
    if any(tmp_path.rglob("genai_config.json")):  # an LLM folder: onnxruntime-genai loads and runs it as written
        pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai runs the LLM folders the page writes")
        from jax2onnx_llm.genai_run import check_folders_run

        check_folders_run(tmp_path)
    written = [p for p in tmp_path.rglob("*.onnx")]
    if not written:
        return  # an API-only block
    for path in written:
        model = onnx.load(str(path))
        onnx.checker.check_model(model, full_check=True)
    if "MyModel" in namespace:  # the @onnx_function example: deterministic, so compare numbers
        from jax2onnx import allclose

        model = onnx.load(str(tmp_path / "model_with_function.onnx"))
        assert {f.name for f in model.functions} >= {"MLPBlock"}
        x = np.random.default_rng(0).standard_normal((100, 256)).astype(np.float32)
        result = allclose(namespace["callable"], model, [x], rtol=1e-3, atol=1e-4)
        assert result, str(result)
    if "my_callable" in namespace:  # quickstart: the eval-mode export must match JAX exactly
        from jax2onnx import allclose, to_onnx

        mlp = namespace["my_callable"]
        mlp.eval()
        model = to_onnx(mlp, [("B", 30)])
        x = np.random.default_rng(1).standard_normal((5, 30)).astype(np.float32)
        assert allclose(mlp, model, [x], rtol=1e-4, atol=1e-5)

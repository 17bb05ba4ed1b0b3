"""The pack as its users get it: installed, found through its entry point, loaded without a warning."""

import warnings

from jax2onnx.testing import PackLoadWarning, PluginRegistry


def test_the_pack_loads_cleanly_and_lowers_its_names():
    registry = PluginRegistry()  # the installed packs, found through their entry points
    with warnings.catch_warnings():
        warnings.simplefilter("error", PackLoadWarning)  # a misspelled hook or an API mismatch fails here
        packs = {p.name: p for p in registry.describe()}
    pack = packs["jax2onnx-mypack"]
    assert pack.error is None, pack.error
    assert pack.lowered == ["library:jax2onnx_mypack.example_library.mish", "mypack_softclip"]


def test_the_readme_example_runs(tmp_path, monkeypatch):
    import os
    import re

    readme = os.path.join(os.path.dirname(__file__), "..", "README.md")
    with open(readme, encoding="utf-8") as f:
        blocks = re.findall(r"^```python\n(.*?)^```", f.read(), flags=re.S | re.M)
    assert blocks
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        namespace = {}
        exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102
    ops = [n.op_type for n in namespace["model"].graph.node]
    assert ops == ["Div", "Tanh", "Mul", "Mish"], ops

"""Core names no pack: the library folders that are not "the user's line" and the command line's
ready-made models come from the loaded packs' hooks."""

from __future__ import annotations

import sys
import textwrap

import pytest
from jax2onnx import UserFunctionError, hookimpl, to_onnx
from jax2onnx.cli import main
from jax2onnx.errors import is_library_file
from jax2onnx.plugin import Demo
from mini_pack import MiniPack, registry_in_use


class _ServingPack(MiniPack):
    """The mini pack, serving a model library and offering a demo."""

    def __init__(self, library: str, demo_target: str) -> None:
        self.library, self.demo_target = library, demo_target

    @hookimpl
    def jax2onnx_library_modules(self):
        return [self.library]

    @hookimpl
    def jax2onnx_demos(self):
        return [Demo("quickstart", self.demo_target, "writes a marker file")]


@pytest.fixture
def model_library(tmp_path, monkeypatch):
    """A model library on sys.path whose layer fails while traced (as a misused keras layer would)."""
    name = "fake_modellib_for_test"
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text(textwrap.dedent("""
        def layer(x):
            return float(x.sum())  # concretizes a traced value: JAX raises here, inside the library

        def demo(output=None):
            open(output, "w").write("ran")
            return 0
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


@pytest.fixture
def serving_registry(model_library):
    with registry_in_use(("jax2onnx-serving", _ServingPack(model_library, f"{model_library}:demo"))) as registry:
        yield registry


def test_a_library_a_loaded_pack_serves_is_not_blamed_as_the_users_line(serving_registry, model_library):
    import importlib

    lib = importlib.import_module(model_library)
    assert not is_library_file(lib.__file__)  # a library only once a loaded pack declares it

    def user_model(x):
        return lib.layer(x)  # <- the user's line

    with pytest.raises(UserFunctionError) as err:
        to_onnx(user_model, [(3,)])
    msg = str(err.value)
    assert is_library_file(lib.__file__), "the registry adds the served library when the packs load"
    assert "test_packs_named_by_packs.py" in msg and model_library not in msg, msg


def test_the_quickstart_is_the_demo_a_pack_offers(serving_registry, tmp_path, capsys):
    assert main(["demo"]) == 0
    assert "quickstart (jax2onnx-serving): writes a marker file" in capsys.readouterr().out
    out = tmp_path / "m.onnx"
    assert main(["quickstart", "-o", str(out)]) == 0
    assert out.read_text() == "ran"


def test_a_demo_nobody_offers_says_so(mini_registry, capsys):
    assert main(["quickstart"]) == 4
    assert "no installed plugin pack offers the demo 'quickstart'" in capsys.readouterr().err

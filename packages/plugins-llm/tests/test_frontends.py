"""Front-ends are registered adapters (issue #41, outcome 4): the pack's own are the folders under
``jax2onnx_llm/frontends/``, another distribution's come from the ``jax2onnx_llm.frontends``
entry-point group (tested here with a fake entry point: the installed metadata is not touched);
the dispatcher knows no library, and no front-end imports another's folder."""

from __future__ import annotations

import ast
import importlib.metadata
import pathlib
import re
import sys

import pytest
from jax2onnx_llm import UnsupportedModelError, export_causal_lm
from jax2onnx_llm.errors import LlmExportError
from jax2onnx_llm.frontends import ENTRY_POINT_GROUP, Frontend, decoder_spec, registered
from jax2onnx_llm.genai_run import left_pad
from jax2onnx_llm.reference import greedy_generate
from llm_test_helpers import NEW_TOKENS, assert_same_tokens, check_folder
from test_spec import EOS, LAYERS, tiny_jax_decoder

PACK = pathlib.Path(__import__("jax2onnx_llm").__file__).parent
FRONTENDS = PACK / "frontends"
FOLDERS = sorted(p.name for p in FRONTENDS.iterdir() if (p / "__init__.py").is_file())


class ToyDecoder:
    """A model of a library no built-in front-end knows."""


TOY_FRONTEND = Frontend(name="toy", takes="a ToyDecoder", claims=lambda m: isinstance(m, ToyDecoder),
                        decoder_spec=lambda m: tiny_jax_decoder())
NOT_A_FRONTEND = object()


class FakeEntryPoint:
    """An installed distribution's entry point, as ``importlib.metadata`` hands it out."""

    def __init__(self, attribute: str):
        self.name, self.value, self.group = attribute.lower(), f"{__name__}:{attribute}", ENTRY_POINT_GROUP
        self.attribute = attribute

    def load(self):
        return getattr(sys.modules[__name__], self.attribute)


def _entry_points(monkeypatch, *attributes: str) -> None:
    """``importlib.metadata.entry_points`` answering the front-end group with entry points to this
    module's ``attributes`` (the other groups as installed)."""
    real = importlib.metadata.entry_points
    points = [FakeEntryPoint(a) for a in attributes]

    def entry_points(**selection):
        return points if selection.get("group") == ENTRY_POINT_GROUP else real(**selection)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def test_the_builtin_frontends_are_the_folders():
    assert FOLDERS == ["gemma_lib", "hf_flax", "keras_hub", "step_function"]
    assert [f.name for f in registered()] == FOLDERS  # with no third-party front-end installed


def test_params_for_a_model_that_carries_its_weights_are_refused(tmp_path):
    with pytest.raises(UnsupportedModelError, match=r"step_function front-end\) carries its own weights: drop params="):
        export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=16, params={"w": 1})
    assert not (tmp_path / "m").exists()


def test_a_third_party_frontend_from_its_entry_point(monkeypatch, tmp_path):
    """An entry point in the group adds a front-end: its model exports and generates its own tokens."""
    model = ToyDecoder()
    with pytest.raises(UnsupportedModelError, match="no causal LM a registered front-end takes"):
        decoder_spec(model)
    _entry_points(monkeypatch, "TOY_FRONTEND")
    assert [f.name for f in registered()] == [*FOLDERS, "toy"]
    folder = export_causal_lm(model, tmp_path / "toy", max_length=64)
    assert check_folder(folder)["model"]["decoder"]["num_hidden_layers"] == LAYERS
    spec = tiny_jax_decoder()
    assert_same_tokens(folder, lambda prompts: greedy_generate(spec, *left_pad(prompts, 0), NEW_TOKENS),
                       pad_token_id=0, eos=EOS)


def test_an_unclaimed_model_names_every_frontend_and_what_it_takes(monkeypatch):
    _entry_points(monkeypatch, "TOY_FRONTEND")
    with pytest.raises(UnsupportedModelError) as exc:
        decoder_spec(object())
    text = str(exc.value)
    assert "\n" not in text and "builtins.object is no causal LM" in text
    for frontend in registered():
        assert f"{frontend.name}: {frontend.takes}" in text
    assert "toy: a ToyDecoder" in text


def test_a_bad_registration_is_refused_naming_it(monkeypatch):
    _entry_points(monkeypatch, "NOT_A_FRONTEND")
    with pytest.raises(LlmExportError, match=r"entry point 'not_a_frontend' \(.*:NOT_A_FRONTEND\).* not a "
                                             r"jax2onnx_llm.frontends.Frontend"):
        registered()
    _entry_points(monkeypatch, "NO_SUCH_NAME")
    with pytest.raises(LlmExportError, match="does not load"):
        registered()
    _entry_points(monkeypatch, "TOY_FRONTEND", "TOY_FRONTEND")
    with pytest.raises(LlmExportError, match=r"\['toy'\] registered more than once"):
        registered()


def test_two_claimants_of_one_precedence_are_refused(monkeypatch):
    twin = Frontend(name="twin", takes="a ToyDecoder too", claims=TOY_FRONTEND.claims,
                    decoder_spec=TOY_FRONTEND.decoder_spec)
    monkeypatch.setattr(sys.modules[__name__], "TWIN", twin, raising=False)
    _entry_points(monkeypatch, "TOY_FRONTEND", "TWIN")
    with pytest.raises(UnsupportedModelError, match=r"claimed by the front-ends \['toy', 'twin'\]"):
        decoder_spec(ToyDecoder())
    # a model saying itself what decoder it is (a higher precedence) is taken at its word
    spec = tiny_jax_decoder()
    model = ToyDecoder()
    model.__jax2onnx_decoder__ = lambda: spec
    assert decoder_spec(model) is spec


# --- layout: adding a front-end touches no other front-end's files -------------------------------------


def _imported(path: pathlib.Path) -> set[str]:
    """The absolute ``jax2onnx_llm`` modules a file imports (``from x import y``: ``x`` and ``x.y``)."""
    module = ".".join(("jax2onnx_llm", *path.relative_to(PACK).with_suffix("").parts))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    package = package.removesuffix(".__init__")
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1] + ([base] if base else []))
            found |= {base} | {f"{base}.{a.name}" for a in node.names}
    return {m for m in found if m.startswith("jax2onnx_llm")}


def _frontend_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "frontends" and parts[2] in FOLDERS else None


def test_no_frontend_imports_another_frontends_folder():
    crossing = {}
    for name in FOLDERS:
        for path in sorted((FRONTENDS / name).rglob("*.py")):
            others = {m for m in _imported(path) if _frontend_of(m) not in (None, name)}
            if others:
                crossing[str(path.relative_to(PACK))] = sorted(others)
    assert not crossing, crossing
    # the scan does see imports (a folder's own modules, the registry)
    assert "jax2onnx_llm.frontends.registry" in _imported(FRONTENDS / "keras_hub" / "__init__.py")
    assert "jax2onnx_llm.frontends.keras_hub.core_attention" in _imported(FRONTENDS / "keras_hub" / "attention.py")


#: KerasHub's MoE lowering: KerasHub-specific, but registered with the onnxruntime fusions (where it
#: lives is the targets' work, issue #45); it takes the front-end's patch class.
OUTSIDE_ALLOWED = {"keras_moe.py": {"jax2onnx_llm.frontends.keras_hub.attention"}}


def test_the_rest_of_the_pack_reaches_frontends_through_the_registry():
    reaching = {}
    for path in sorted(PACK.rglob("*.py")):
        if FRONTENDS in path.parents:
            continue
        allowed = OUTSIDE_ALLOWED.get(path.name, set())
        named = {m for m in _imported(path) if _frontend_of(m) and not any(m.startswith(a) for a in allowed)}
        if named:
            reaching[str(path.relative_to(PACK))] = sorted(named)
    assert not reaching, reaching


#: Names of model libraries (and the built-in front-ends' folders) that the dispatcher must not know.
LIBRARY_NAMES = ("transformers", "keras", "flax", "hugging", "gemma", "nnx", "torch", *FOLDERS)


def test_the_dispatcher_names_no_library():
    for path in (FRONTENDS / "__init__.py", FRONTENDS / "registry.py", FRONTENDS / "support.py"):
        words = set(re.findall(r"[a-z0-9_]+", path.read_text(encoding="utf-8").lower()))
        named = [n for n in LIBRARY_NAMES if n in words or any(w.startswith(n) for w in words)]
        assert not named, (path.name, named)
        assert not {m for m in _imported(path) if _frontend_of(m)}, path


def test_every_frontend_registers_its_lowerings_with_the_pack():
    from jax2onnx_llm.plugin import plugin

    for frontend in registered():
        own = f"jax2onnx_llm.frontends.{frontend.name}."
        assert all(m.startswith(own) for m in frontend.lowerings), frontend.lowerings  # beside its adapter
        for module in frontend.lowerings:
            assert module.removeprefix("jax2onnx_llm.") in plugin.module_names, module
            assert (PACK / pathlib.Path(*module.split(".")[1:])).with_suffix(".py").is_file(), module
    assert len([m for m in plugin.module_names if m.startswith("frontends.")]) == 5  # HF 2, KerasHub 2, gemma 1

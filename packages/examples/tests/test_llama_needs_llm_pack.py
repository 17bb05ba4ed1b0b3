"""``jax2onnx_examples.llama`` builds on the LLM pack, an optional extra of this pack
(``jax2onnx-examples[llm]``): without it, importing the module says which install is missing, and
the pack's quickstart does not need it."""

from __future__ import annotations

import importlib
import sys

import pytest


def test_llama_without_the_llm_pack_names_the_install(monkeypatch):
    monkeypatch.delitem(sys.modules, "jax2onnx_examples.llama", raising=False)
    monkeypatch.setitem(sys.modules, "jax2onnx_llm", None)  # an import of it fails as if not installed
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'jax2onnx-examples\[llm\]'") as info:
        importlib.import_module("jax2onnx_examples.llama")
    assert info.value.name == "jax2onnx_llm"


def test_the_quickstart_imports_without_the_llm_pack(monkeypatch):
    monkeypatch.delitem(sys.modules, "jax2onnx_examples.quickstart", raising=False)
    monkeypatch.setitem(sys.modules, "jax2onnx_llm", None)
    quickstart = importlib.import_module("jax2onnx_examples.quickstart")
    assert callable(quickstart.main)

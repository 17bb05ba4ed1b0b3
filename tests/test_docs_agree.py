"""The docs say what the code does, checked where a test can: the API reference (docs/guide/api.md)
covers ``jax2onnx.__all__``; every opset range the docs state is ``jax2onnx.ir.opsets``'; the
README's ``to_onnx`` line is its signature; the README names every command-line verb; the
README's verify batch sizes are the ones the quickstart prints."""

from __future__ import annotations

import argparse
import ast
import glob
import importlib
import importlib.util
import inspect
import os
import re
import tomllib

import jax2onnx
import pytest
from jax2onnx.ir import opsets

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def _read(*parts: str) -> str:
    with open(os.path.join(ROOT, *parts), encoding="utf-8") as f:
        return f.read()


def _resolve(path: str):
    """The object a mkdocstrings ``::: a.b.c`` path names: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return obj
    raise ImportError(path)


# -- the API reference ---------------------------------------------------------------------------
API_PAGE = ("docs", "guide", "api.md")


def _documented_paths() -> list[str]:
    return re.findall(r"^::: ([\w.]+)\s*$", _read(*API_PAGE), flags=re.M)


def test_every_api_reference_entry_resolves():
    paths = _documented_paths()
    assert len(paths) > 20, paths
    for path in paths:
        top = path.split(".")[0]
        if top != "jax2onnx" and importlib.util.find_spec(top) is None:
            continue  # a pack's entry (its package is not installed here); the docs build reads its source
        _resolve(path)  # raises for a name that moved or is gone


def test_the_api_reference_covers_every_public_name():
    text = _read(*API_PAGE)
    documented = {id(_resolve(p)) for p in _documented_paths() if p.startswith("jax2onnx.")}
    missing = []
    for name in jax2onnx.__all__:
        obj = getattr(jax2onnx, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            if id(obj) not in documented:
                missing.append(name)
        elif f"`jax2onnx.{name}`" not in text:  # a value (the version, the hook marker): said in prose
            missing.append(name)
    assert missing == [], f"docs/guide/api.md does not document jax2onnx.{missing}"


def test_the_api_reference_documents_the_llm_packs_entry_point():
    assert "jax2onnx_llm.export_causal_lm" in _documented_paths()
    # the docs build reads that pack's source: mkdocstrings must be told where it is
    assert "packages/plugins-llm/src" in _read("mkdocs.yml")


# -- the opset range -----------------------------------------------------------------------------
DOC_FILES = sorted({os.path.relpath(p, ROOT) for pattern in ("README.md", "docs/*.md", "docs/guide/*.md", "packages/*/README.md")
                    for p in glob.glob(os.path.join(ROOT, pattern))} - {"docs/coverage.md"})
#: "opsets 13 to the newest", "from **13** to the newest", "`opset` is 13 to the newest"
_OLDEST = re.compile(r"(?:from|opsets?`?|is)\s+\**(\d+)\**\s+to\s+the\s+newest")
#: "opset=23, *" in a written-out signature
_SIGNATURE_DEFAULT = re.compile(r"opset=(\d+),\s*\*")
#: "(default 23)" or "the default is 23" in a paragraph about opsets
_DEFAULT = re.compile(r"\bdefault(?: is)? \**(\d+)\**")


def test_every_stated_oldest_opset_is_min_opset():
    found = {}
    for path in DOC_FILES:
        for m in _OLDEST.finditer(_read(path)):
            found.setdefault(path, []).append(int(m.group(1)))
    assert {"README.md", "docs/guide/migrating-from-0.17.md", "docs/guide/targets.md", "docs/opsets.md"} <= set(found), found
    wrong = {p: v for p, v in found.items() if any(n != opsets.MIN_OPSET for n in v)}
    assert wrong == {}, f"jax2onnx.ir.opsets.MIN_OPSET is {opsets.MIN_OPSET}: {wrong}"


def test_the_newest_opset_is_the_installed_onnxs():
    # The docs say "to the newest the installed `onnx` knows": so must the code.
    import onnx

    assert opsets.max_opset() == onnx.defs.onnx_opset_version()


def test_every_stated_default_opset_is_default_opset():
    found = {}
    for path in DOC_FILES:
        text = _read(path)
        values = [int(v) for v in _SIGNATURE_DEFAULT.findall(text)]
        for paragraph in re.split(r"\n\s*\n", text):
            if "opset" in paragraph.lower():
                values += [int(v) for v in _DEFAULT.findall(paragraph)]
        if values:
            found[path] = values
    assert {"README.md", "docs/guide/migrating-from-0.17.md", "docs/guide/targets.md"} <= set(found), found
    wrong = {p: v for p, v in found.items() if any(n != opsets.DEFAULT_OPSET for n in v)}
    assert wrong == {}, f"jax2onnx.ir.opsets.DEFAULT_OPSET is {opsets.DEFAULT_OPSET}: {wrong}"


# -- the README's to_onnx line -------------------------------------------------------------------
def _written_signature(text: str, start: str) -> inspect.Signature:
    """The signature written as ``to_onnx(...)`` right after ``start`` in ``text`` (wrapped lines joined)."""
    at = text.index(start) + len(start)
    depth, end = 1, at
    while depth:
        depth += {"(": 1, ")": -1}.get(text[end], 0)
        end += 1
    params = " ".join(text[at : end - 1].split())
    func = ast.parse(f"def to_onnx({params}): pass").body[0]
    args = func.args
    defaults = [None] * (len(args.args) - len(args.defaults)) + list(args.defaults)
    out = [inspect.Parameter(a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD,
                             default=inspect.Parameter.empty if d is None else ast.literal_eval(d))
           for a, d in zip(args.args, defaults)]
    out += [inspect.Parameter(a.arg, inspect.Parameter.KEYWORD_ONLY, default=ast.literal_eval(d))
            for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    return inspect.Signature(out)


def _code_signature() -> inspect.Signature:
    sig = inspect.signature(jax2onnx.to_onnx)
    return inspect.Signature([p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()])


def test_the_readmes_to_onnx_line_is_its_signature():
    written = _written_signature(_read("README.md"), "- `to_onnx(")
    assert str(written) == str(_code_signature())


def test_the_migration_guide_names_every_keyword_added_since_017():
    text = _read("docs", "guide", "migrating-from-0.17.md")
    published = _written_signature(text, "Same signature: `to_onnx(")
    added = [p for name, p in _code_signature().parameters.items() if name not in published.parameters]
    assert added, "the signature grew since 0.17"
    flat = " ".join(text.split())
    missing = [str(p) for p in added if f"`{str(p).replace(chr(39), chr(34))}`" not in flat]
    assert missing == [], f"the migration guide's list of added keywords lacks {missing}"


# -- the README's command-line verbs -------------------------------------------------------------
def _verbs(parser: argparse.ArgumentParser) -> set[str]:
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return set(sub.choices)


def _pack_verbs() -> set[str]:
    """The verbs this repository's packs add (entry-point group ``jax2onnx.cli`` in their pyproject)."""
    verbs = set()
    for path in glob.glob(os.path.join(ROOT, "packages", "*", "pyproject.toml")):
        with open(path, "rb") as f:
            verbs |= set(tomllib.load(f)["project"].get("entry-points", {}).get("jax2onnx.cli", {}))
    return verbs


def test_the_readme_names_every_command_line_verb(monkeypatch):
    from jax2onnx.cli import commands

    installed = _verbs(commands.build_parser())
    monkeypatch.setattr(commands, "_add_pack_commands", lambda sub: None)
    core = _verbs(commands.build_parser())
    (cli_line,) = [b for b in re.split(r"\n(?=- )", _read("README.md")) if b.startswith("- CLI")]
    readme = set(re.findall(r"`jax2onnx (\w+)", cli_line))
    assert readme == core | _pack_verbs(), f"README.md's CLI line names {sorted(readme)}"
    assert installed <= readme


# -- verify's batch sizes ------------------------------------------------------------------------
_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4}


def test_the_readmes_verify_batch_sizes_are_what_the_quickstart_prints(tmp_path, capsys):
    pytest.importorskip("jax2onnx_examples")
    pytest.importorskip("onnxruntime")
    from jax2onnx.verification.report import TRIAL_SIZES
    from jax2onnx_examples.quickstart import main

    (said,) = re.findall(r"verify=True also runs it in onnxruntime against JAX \((\w+) batch sizes\)", _read("README.md"))
    assert main(str(tmp_path / "q.onnx")) == 0
    (printed,) = re.findall(r"verification against JAX in onnxruntime \(batch ([\d, ]+)\): OK", capsys.readouterr().out)
    sizes = [int(s) for s in printed.split(",")]
    assert len(sizes) == _NUMBERS[said] == len(TRIAL_SIZES)


#: Which install names a top-level module the LLM guide's blocks import: the LLM pack's own extras or
#: another distribution (modules every one of these brings along — jax, numpy, flax via the examples
#: pack, the standard library — need no word of their own).
_LLM_GUIDE_INSTALLS = {
    "onnxruntime_genai": "jax2onnx-llm[genai",
    "transformers": "transformers",  # the extra's name, jax2onnx-llm[...,transformers]
    "jax2onnx_examples": "jax2onnx-examples[llm]",
    "keras_hub": "[keras-hub]",
}


def test_the_llm_guides_install_line_installs_what_its_blocks_import():
    """Issue #32: the guide's first install line brings every library its runnable blocks import."""
    text = _read("docs", "guide", "llm.md")
    line = next(p for p in text.split("\n\n") if "pip install" in p)  # the first paragraph that installs
    imported: set[str] = set()
    for block in re.findall(r"```python\n(.*?)```", text, flags=re.S):
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module.split(".")[0])
    needed = {m: word for m, word in _LLM_GUIDE_INSTALLS.items() if m in imported}
    assert "onnxruntime_genai" in needed and "jax2onnx_examples" in needed, imported  # the table still fits the page
    missing = {m: word for m, word in needed.items() if word not in line}
    assert not missing, f"the install line {line!r} does not install {missing}"

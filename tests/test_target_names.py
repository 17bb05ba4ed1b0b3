"""No module outside ``jax2onnx/targets/`` names a target or an onnxruntime execution provider:
packs, front-ends and core's stages ask the target object (``ctx.target.allows(op, domain)``,
``target.can("genai")``, ``target.requested_rewrites(...)``, ``target.providers``), so a new target
is one folder and nothing else changes (docs/architecture.md, "Adding a target").

What counts as naming a target (read from the syntax tree, docstrings aside: they describe):

- a string holding ``ExecutionProvider`` (a provider is the target's verification runner);
- a registered target's name or alias as a string compared with something called ``*target*``
  (``args.target == "web"``, ``target in ("onnx", "generic")``), passed as ``target=`` or as a
  ``target`` parameter's default, given to ``get_target``, listed in a ``*TARGET*`` constant or
  in ``--target``'s ``choices``/``default``;
- ``target='<name>'`` written inside any other string, or a quoted name in an f-string about the
  target (an error message choosing for the user).

Importing the ``onnxruntime`` Python module, its distribution names and its version key are the
library, not the target, and are not matched.
"""

from __future__ import annotations

import ast
import pathlib
import re

import pytest
from jax2onnx.targets import available_targets

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = sorted(ROOT.glob("packages/*/src"))
#: (path glob under packages/, why it may name targets): kept tiny
ALLOWED = {
    "core/src/jax2onnx/targets/**": "the targets themselves",
    "*/src/*/testcases/**": "testcases are user programs: each exports for the target it chooses, as a user does",
    "core/src/jax2onnx/ir/kernel_probe.py": "measures onnxruntime's CPU kernels for the table Target.kernel_table "
                                           "serves; ir/ cannot import targets/ (targets import ir/)",
}


def _names() -> set[str]:
    return {name for t in available_targets() for name in (t.name, *t.aliases)}


def _allowed(path: pathlib.Path) -> bool:
    rel = path.relative_to(ROOT / "packages")
    return any(_under(rel, pattern) or rel.as_posix() == pattern for pattern in ALLOWED)


def _under(rel: pathlib.Path, pattern: str) -> bool:
    if not pattern.endswith("/**"):
        return False
    return re.fullmatch(pattern[:-3].replace("*", "[^/]+") + "/.*", rel.as_posix()) is not None


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _strings(node: ast.AST) -> list[ast.Constant]:
    """The string constants ``node`` is or holds directly (a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [e for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return []


def _mentions_target(node: ast.AST) -> bool:
    return "target" in ast.unparse(node).lower()


def findings(path: pathlib.Path, names: set[str]) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    alternatives = "|".join(map(re.escape, sorted(names)))
    quoted = re.compile(r"target=['\"](" + alternatives + r")['\"]")
    loose = re.compile(r"['\"](" + alternatives + r")['\"]")
    named: list[ast.Constant] = []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            if "ExecutionProvider" in node.value:
                found.append(f"{node.lineno}: execution provider {node.value!r}")
            elif quoted.search(node.value):
                found.append(f"{node.lineno}: {quoted.search(node.value).group(0)} in a string")
        if isinstance(node, ast.JoinedStr) and id(node) not in docs:
            text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
            if "target" in text and loose.search(text):  # "target={target!r}: use 'onnx' or ..."
                found.append(f"{node.lineno}: {loose.search(text).group(0)} in a message about the target")
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            if any(_mentions_target(s) for s in sides):
                named += [c for s in sides for c in _strings(s)]
        elif isinstance(node, ast.Call):
            func = ast.unparse(node.func)
            named += [c for k in node.keywords if k.arg == "target" for c in _strings(k.value)]
            if func.endswith("get_target") and node.args:
                named += _strings(node.args[0])
            if func.endswith("add_argument") and node.args and _strings(node.args[0]) \
                    and _strings(node.args[0])[0].value == "--target":
                named += [c for k in node.keywords if k.arg in ("choices", "default") for c in _strings(k.value)]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            args = node.args
            positional = [*args.posonlyargs, *args.args]
            pairs = [*zip(positional[len(positional) - len(args.defaults):], args.defaults),
                     *((a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None)]
            named += [c for a, d in pairs if a.arg == "target" for c in _strings(d)]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if node.value is not None and any("TARGET" in ast.unparse(t).upper() for t in targets):
                named += _strings(node.value)
    found += [f"{c.lineno}: target name {c.value!r}" for c in named if c.value in names and id(c) not in docs]
    return sorted(set(found), key=lambda f: int(f.split(":")[0]))


def _modules() -> list[pathlib.Path]:
    return [p for src in SOURCES for p in sorted(src.rglob("*.py")) if not _allowed(p)]


def test_no_module_outside_targets_names_a_target_or_a_provider():
    names = _names()
    assert {"onnx", "onnxruntime", "tensorrt", "web"} <= names  # the scan knows what it looks for
    bad = {str(p.relative_to(ROOT)): f for p in _modules() if (f := findings(p, names))}
    assert not bad, "name the target's capability instead (docs/architecture.md, 'Adding a target'):\n" + "\n".join(
        f"{path}:{line}" for path, lines in bad.items() for line in lines)


@pytest.mark.parametrize("source", [
    'if args.target == "web": pass',
    'ok = target in ("onnx", "generic")',
    'to_onnx(f, [], target="onnxruntime")',
    'def export(model, target="onnxruntime"): pass',
    'TARGETS = ("onnxruntime", "onnx")',
    'p.add_argument("--target", default="onnx", choices=["onnxruntime", "onnx"])',
    'get_target("tensorrt")',
    'raise ValueError(f"use {x} with target=\'onnxruntime\'")',
    'providers = ["CPUExecutionProvider"]',
    'raise OptionError(f"target={target!r}: use \'onnxruntime\' or \'onnx\'")',
])
def test_the_scan_finds_each_way_of_naming_a_target(tmp_path, source):
    path = tmp_path / "module.py"
    path.write_text('"""A docstring may say target="onnxruntime"."""\n' + source + "\n")
    assert findings(path, _names()), source


@pytest.mark.parametrize("source", [
    "import onnxruntime",
    'spec = importlib.util.find_spec("onnxruntime")',
    'DISTRIBUTIONS = ("onnxruntime", "onnxruntime-gpu")',
    'version = table["onnxruntime"]',
    'if export_mode == "web": pass',
    'if ctx.target.allows("Inverse", "com.microsoft"): pass',
])
def test_the_scan_leaves_the_library_and_other_words_alone(tmp_path, source):
    path = tmp_path / "module.py"
    path.write_text('"""A docstring may say target="onnxruntime"."""\n' + source + "\n")
    assert findings(path, _names()) == [], source


def test_the_allow_list_is_needed():
    """Each allowed path exists and names a target (an entry nothing needs any more goes)."""
    names = _names()
    for pattern in ALLOWED:
        hits = [p for src in SOURCES for p in src.rglob("*.py") if _under(p.relative_to(ROOT / "packages"), pattern)
                or p.relative_to(ROOT / "packages").as_posix() == pattern]
        assert any(findings(p, names) for p in hits), pattern

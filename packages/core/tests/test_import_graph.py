"""Core's modules import each other without a circle, counting every import: module level,
function-local and ``TYPE_CHECKING``.

A circle held together by a function-local import still ties the modules into one knot (none can
be understood, tested or moved without the others), so the graph must be a DAG. Importing
``jax2onnx.a.b`` also runs the package ``jax2onnx.a``'s ``__init__``, which counts as an edge, except
from a module inside ``jax2onnx.a`` (that ``__init__`` ran before the module could) and for the
root package ``jax2onnx`` (every module lives under it; its ``__init__`` only gathers the public
names).
"""

from __future__ import annotations

import ast
import pathlib

import jax2onnx

ROOT = pathlib.Path(jax2onnx.__file__).parent
PACKAGE = "jax2onnx"


def module_name(path: pathlib.Path) -> str:
    parts = [PACKAGE, *path.relative_to(ROOT).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def core_modules() -> dict[str, pathlib.Path]:
    return {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _with_packages(target: str, modules: dict[str, pathlib.Path]) -> set[str]:
    """``target`` (if a core module) and the core packages above it whose ``__init__`` it runs."""
    found = set()
    parts = target.split(".")
    for end in range(2, len(parts) + 1):  # from jax2onnx.<x>: the root package does not count
        name = ".".join(parts[:end])
        if name in modules:
            found.add(name)
    return found


def imports_of(name: str, path: pathlib.Path, modules: dict[str, pathlib.Path]) -> set[str]:
    """Every core module ``name`` imports, wherever the import statement stands."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                targets |= _with_packages(alias.name, modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not (source == PACKAGE or source.startswith(PACKAGE + ".")):
                continue
            targets |= _with_packages(source, modules)
            for alias in node.names:  # ``from . import compat`` imports the module compat
                targets |= {m for m in _with_packages(f"{source}.{alias.name}", modules) if m != source}
    own_packages = {".".join(name.split(".")[:end]) for end in range(1, name.count(".") + 2)}
    return targets - own_packages


def import_graph() -> dict[str, set[str]]:
    modules = core_modules()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle as ``[a, b, ..., a]``, or ``None`` for a DAG (iterative depth-first search)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: finished
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def test_the_graph_is_read():
    graph = import_graph()
    # a few edges that exist for certain, so an empty or mis-parsed graph cannot pass
    assert "jax2onnx.compat" in graph["jax2onnx.plugin"]
    assert "jax2onnx.export.trace" in graph["jax2onnx.export.program"]
    assert "jax2onnx.passes" in graph["jax2onnx.export.optimize"]  # the package: its __init__ runs
    assert "jax2onnx.ir.builder" in graph["jax2onnx.lower.interpreter"]


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_in_core():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle in core: " + " -> ".join(cycle or [])


#: Where a function-local import of a core module is the right thing, and why.
LOCAL_IMPORTS_ALLOWED = {
    # pytest loads this plugin in every session, before XLA_FLAGS are set: importing jax2onnx
    # (and so JAX) at its top would fix XLA's flags before the ini option can add them.
    "jax2onnx.testing.pytest_plugin",
}


def test_core_modules_import_each_other_at_module_level():
    """A function-local import hides an edge of the import graph (and a circle behind it); core
    imports core at module level, except where a module is named above or the import is guarded
    by ``try``/``except ImportError`` (a feature with an optional dependency)."""
    modules = core_modules()
    hidden = []
    for name, path in modules.items():
        if name in LOCAL_IMPORTS_ALLOWED:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) for b in t.body for n in ast.walk(b)}
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if id(node) in guarded:
                    continue
                if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(PACKAGE)):
                    hidden.append(f"{name}:{node.lineno}")
                elif isinstance(node, ast.Import) and any(a.name.startswith(PACKAGE) for a in node.names):
                    hidden.append(f"{name}:{node.lineno}")
    assert not hidden, f"function-local imports of core modules: {hidden}"

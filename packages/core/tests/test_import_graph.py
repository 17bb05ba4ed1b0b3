"""Core's modules import each other without a circle, counting every import: module level,
function-local and ``TYPE_CHECKING``; and core's folders (its stages: ``export/``, ``lower/``,
``passes/``, ``precision/``, ``verification/``, ...) import each other without a circle either.

A circle held together by a function-local import still ties the modules into one knot (none can
be understood, tested or moved without the others), so the graph must be a DAG. Importing
``jax2onnx.a.b`` also runs the package ``jax2onnx.a``'s ``__init__``, which counts as an edge, except
from a module inside ``jax2onnx.a`` (that ``__init__`` ran before the module could) and for the
root package ``jax2onnx`` (every module lives under it; its ``__init__`` only gathers the public
names). A *name* a module takes from a package's ``__init__`` (``from . import helper`` where
``helper`` is no submodule) is an edge to that ``__init__`` wherever the module lives: a package
whose ``__init__`` imports its submodules while they import from it is a circle.

An import statement that names the module's own package (or a package above it) is an edge to that
package too, whatever it takes: ``from . import sibling`` and ``import pkg.sub`` (in ``pkg.sub.x``)
consult the package module, which is only part-run while its ``__init__`` imports ``x``; so a module
imports its siblings by their own names (``from .sibling import f``). Core's root package counts
like any other: ``jax2onnx/__init__`` gathers the public names of every stage, so core's modules
take the shared top-level modules by their own names too (``from ..compat import x64_enabled``,
never ``from .. import compat``).

The scan is written for any package (``import_graph(root, package)``): tests/test_layout_rules.py
runs it over every pack's sources too.
"""

from __future__ import annotations

import ast
import pathlib

import jax2onnx

ROOT = pathlib.Path(jax2onnx.__file__).parent
PACKAGE = "jax2onnx"


def module_name(path: pathlib.Path, root: pathlib.Path = ROOT, package: str = PACKAGE) -> str:
    parts = [package, *path.relative_to(root).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_modules(root: pathlib.Path, package: str) -> dict[str, pathlib.Path]:
    """Every module of the package whose folder is ``root``, by its dotted name."""
    return {module_name(p, root, package): p for p in sorted(root.rglob("*.py"))}


def core_modules() -> dict[str, pathlib.Path]:
    return package_modules(ROOT, PACKAGE)


def _with_packages(target: str, modules: dict[str, pathlib.Path]) -> set[str]:
    """``target`` (if a module of the scanned package) and the packages above it whose ``__init__``
    it runs."""
    found = set()
    parts = target.split(".")
    for end in range(2, len(parts) + 1):  # from <package>.<x>: the root package does not count
        name = ".".join(parts[:end])
        if name in modules:
            found.add(name)
    return found


def imports_of(name: str, path: pathlib.Path, modules: dict[str, pathlib.Path], package: str = PACKAGE) -> set[str]:
    """Every module of ``package`` that ``name`` imports, wherever the import statement stands."""
    is_package = path.name == "__init__.py"
    here = name.split(".") if is_package else name.split(".")[:-1]
    targets: set[str] = set()
    names_from: set[str] = set()  # packages (or modules) a name defined in them is taken from
    own_named: set[str] = set()  # modules an import statement names itself (``from . import x`` names ``.``)
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                targets |= _with_packages(alias.name, modules)
                own_named.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if not (source == package or source.startswith(package + ".")):
                continue
            targets |= _with_packages(source, modules)
            own_named.add(source)
            for alias in node.names:
                submodule = f"{source}.{alias.name}"
                if submodule in modules:  # ``from . import compat`` imports the module compat
                    targets |= {m for m in _with_packages(submodule, modules) if m != source}
                elif source in modules:  # a name defined in ``source`` (its ``__init__`` for a package)
                    names_from.add(source)
    own_packages = {".".join(name.split(".")[:end]) for end in range(1, name.count(".") + 1)}
    return ((targets - own_packages) | names_from | (own_named & own_packages)) - {name}


def import_graph(root: pathlib.Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    modules = package_modules(root, package)
    return {name: imports_of(name, path, modules, package) for name, path in modules.items()}


def core_graph() -> dict[str, set[str]]:
    return import_graph(ROOT, PACKAGE)


def folder_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The module graph collapsed onto the package's top level: each folder (``export``,
    ``verification``, ...) or top-level module (``compat``, ``errors``, ...) is one node, with an edge
    where any of its modules imports one of another's. The root package (its ``__init__`` gathers
    the public names from all of them) is left out."""
    def top(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if len(parts) > 1 else None

    folders: dict[str, set[str]] = {}
    for module, targets in graph.items():
        here = top(module)
        if here is None:
            continue
        folders.setdefault(here, set())
        folders[here] |= {t for t in map(top, targets) if t is not None and t != here}
    return folders


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
    graph = core_graph()
    # a few edges that exist for certain, so an empty or mis-parsed graph cannot pass
    assert "jax2onnx.compat" in graph["jax2onnx.plugin"]
    assert "jax2onnx.export.trace" in graph["jax2onnx.export.program"]
    assert "jax2onnx.passes" in graph["jax2onnx.export.optimize"]  # the package: its __init__ runs
    assert "jax2onnx.ir.builder" in graph["jax2onnx.lower.interpreter"]


def test_find_cycle_finds_one():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_no_import_cycle_in_core():
    cycle = find_cycle(core_graph())
    assert cycle is None, "import cycle in core: " + " -> ".join(cycle or [])


def test_a_name_from_an_own_package_init_is_an_edge(tmp_path):
    """A submodule taking a helper from its package's ``__init__`` while that ``__init__`` imports
    the submodule (even function-locally) is a circle; importing a sibling module by its own name
    is not."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("def helper():\n    pass\n\ndef run():\n    from . import adapter\n")
    (pkg / "sub" / "adapter.py").write_text("from . import helper\nfrom .sibling import f\n")
    (pkg / "sub" / "sibling.py").write_text("import pkg.sub.other\n\ndef f():\n    pass\n")
    (pkg / "sub" / "other.py").write_text("")
    graph = import_graph(pkg, "pkg")
    assert graph["pkg.sub.adapter"] == {"pkg.sub", "pkg.sub.sibling"}
    assert graph["pkg.sub.sibling"] == {"pkg.sub.other"}
    assert find_cycle(graph) == ["pkg.sub", "pkg.sub.adapter", "pkg.sub"]


def test_naming_the_own_package_is_an_edge(tmp_path):
    """``from . import sibling`` (or ``from .. import x``, ``import pkg.sub``) names the module's own
    package: while that package's ``__init__`` imports the module, a circle. The root package
    counts too; importing the module by its own name (``from .helpers import h``) is no such edge."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .top import g\n")
    (pkg / "top.py").write_text("from . import helpers\n\ndef g():\n    pass\n")
    (pkg / "helpers.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import a, b\n")
    (pkg / "sub" / "a.py").write_text("from . import b\n")
    (pkg / "sub" / "b.py").write_text("import pkg.sub\nfrom .. import helpers\n")
    graph = import_graph(pkg, "pkg")
    assert graph["pkg.top"] == {"pkg", "pkg.helpers"}
    assert graph["pkg.sub"] == {"pkg.sub.a", "pkg.sub.b"}  # an __init__ naming itself is no edge
    assert graph["pkg.sub.a"] == {"pkg.sub", "pkg.sub.b"}
    assert graph["pkg.sub.b"] == {"pkg.sub", "pkg", "pkg.helpers"}
    assert find_cycle(graph) == ["pkg", "pkg.top", "pkg"]
    (pkg / "helpers.py").write_text("def h():\n    pass\n")
    (pkg / "top.py").write_text("from .helpers import h\n\ndef g():\n    pass\n")
    (pkg / "sub" / "b.py").write_text("from ..helpers import h\n")
    by_name = import_graph(pkg, "pkg")
    assert by_name["pkg.top"] == {"pkg.helpers"} and by_name["pkg.sub.b"] == {"pkg.helpers"}
    assert find_cycle(by_name) == ["pkg.sub", "pkg.sub.a", "pkg.sub"]


def test_folder_graph_collapses_onto_the_top_level():
    graph = {"p.a.x": {"p.b.y", "p.a.z"}, "p.a.z": set(), "p.b.y": {"p.c"}, "p.c": set(), "p": {"p.a.x"}}
    assert folder_graph(graph) == {"a": {"b"}, "b": {"c"}, "c": set()}
    assert find_cycle(folder_graph({**graph, "p.c": {"p.a.z"}})) == ["a", "b", "c", "a"]


def test_no_folder_cycle_between_cores_stages():
    """Each of core's folders and top-level modules depends on the others one way only: e.g. the
    export (``to_onnx`` runs every stage, verification last) imports ``verification/``, which
    imports nothing of ``export/``; the CLI imports ``testing/``, not the other way round."""
    folders = folder_graph(core_graph())
    assert {"export", "lower", "passes", "precision", "verification", "cli", "testing", "ir"} <= set(folders)
    assert "verification" in folders["export"] and "testing" in folders["cli"]  # the scan sees these edges
    cycle = find_cycle(folders)
    assert cycle is None, "folder cycle in core: " + " -> ".join(cycle or [])


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

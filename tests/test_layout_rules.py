"""The repository's layout rules (issue #22's acceptance checks), read from the files: the README
links the living design; each pack's ``plugin.py`` is one statement; core names no pack; nothing in
the packages calls the builtin ``eval``; no lowering compares the opset with a number; the floor
session deselects nothing.

Issue #33's layers: no import circle inside any pack (core's own, and the circle between core's
folders, are packages/core/tests/test_import_graph.py's, whose scan this reuses); no source file
over 800 lines; each pack declares the distributions of the ``jax2onnx*`` modules it imports.
The testcase imports on export have their own test (tests/test_no_testcases_on_export.py).
"""

from __future__ import annotations

import ast
import functools
import glob
import importlib.util
import os
import pathlib
import re
import tomllib

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CORE_SRC = os.path.join(ROOT, "packages", "core", "src", "jax2onnx")


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


@functools.cache
def _nodes(path: str) -> tuple[ast.AST, ...]:
    """Every AST node of a source file, parsed and walked once per session: the rules below read
    the same few hundred files, and parsing and walking them was most of each rule's time."""
    return tuple(ast.walk(ast.parse(_read(path))))


def _packs() -> dict[str, str]:
    """distribution name -> import name of every pack (each package with a ``plugin.py``)."""
    packs = {}
    for plugin in glob.glob(os.path.join(ROOT, "packages", "*", "src", "*", "plugin.py")):
        package = os.path.dirname(os.path.dirname(os.path.dirname(plugin)))
        with open(os.path.join(package, "pyproject.toml"), "rb") as f:
            name = tomllib.load(f)["project"]["name"]
        if name != "jax2onnx-core":
            packs[name] = os.path.basename(os.path.dirname(plugin))
    return packs


def test_the_readme_links_the_living_design():
    assert os.path.exists(os.path.join(ROOT, "docs", "architecture.md"))
    assert "(docs/architecture.md)" in _read(os.path.join(ROOT, "README.md"))


def test_each_packs_plugin_is_one_statement():
    """Beside its docstring and imports, a pack's plugin module is the one ``plugin = ...``."""
    plugins = [*glob.glob(os.path.join(ROOT, "packages", "*", "src", "*", "plugin.py")),
               *glob.glob(os.path.join(ROOT, "templates", "plugin-pack", "src", "*", "plugin.py"))]
    plugins = [p for p in plugins if not p.startswith(CORE_SRC)]
    assert len(plugins) >= 8, plugins
    for path in plugins:
        body = ast.parse(_read(path)).body
        rest = [s for s in body if not isinstance(s, (ast.Import, ast.ImportFrom))
                and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
        assert len(rest) == 1 and isinstance(rest[0], ast.Assign), f"{path}: {[type(s).__name__ for s in rest]}"
        assert [t.id for t in rest[0].targets if isinstance(t, ast.Name)] == ["plugin"], path


def test_core_names_no_pack():
    """No distribution or import name of a pack in core's code (docstrings and comments included):
    packs are found through their entry points and hooks."""
    packs = _packs()
    assert "jax2onnx-lax" in packs and "jax2onnx-examples" in packs, packs
    names = re.compile("|".join(re.escape(n) for pair in packs.items() for n in pair) + r"\b")
    found = [f"{os.path.relpath(path, ROOT)}:{i}: {line.strip()}"
             for path in glob.glob(os.path.join(CORE_SRC, "**", "*.py"), recursive=True)
             for i, line in enumerate(_read(path).splitlines(), 1) if names.search(line)]
    assert not found, "\n".join(found)


def test_no_builtin_eval_in_the_packages():
    """``eval`` of text (dim expressions were once evaluated so) is never needed: JAX evaluates
    symbolic dims. ``model.eval()`` (Flax's mode switch) is a method, not the builtin. (The one
    ``exec`` is core's fallback loader running core's own shipped ``__init__.py``.)"""
    found = []
    for path in glob.glob(os.path.join(ROOT, "packages", "*", "**", "*.py"), recursive=True):
        for node in _nodes(path):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "eval":
                found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}")
    assert not found, found


#: Where an opset number is itself the knowledge: legalization's per-version forms of an op, and
#: the kernel probe writing Reduce nodes in the axes form of the opset it probes.
_OPSET_FORM_FILES = ("ir/legalize.py", "ir/legalize_opset13.py", "ir/kernel_probe.py")


def test_no_lowering_compares_the_opset_with_a_number():
    """Whether an op exists at the export's opset is asked (``ctx.has_op``,
    ``jax2onnx.ir.opsets.op_available``, ``ctx.kernel_dtypes``), never written as ``opset < N``."""
    found = []
    for path in glob.glob(os.path.join(ROOT, "packages", "*", "src", "**", "*.py"), recursive=True):
        if path.replace(os.sep, "/").endswith(_OPSET_FORM_FILES):
            continue
        for node in _nodes(path):
            if not isinstance(node, ast.Compare):
                continue
            operands = [node.left, *node.comparators]
            names = [getattr(o, "id", None) or getattr(o, "attr", None) or "" for o in operands]
            if any(n.endswith("opset") for n in names) and any(
                    isinstance(o, ast.Constant) and isinstance(o.value, int) for o in operands):
                found.append(f"{os.path.relpath(path, ROOT)}:{node.lineno}")
    assert not found, f"ask jax2onnx.ir.opsets.op_available (ctx.has_op) instead of an opset number: {found}"


def test_the_floor_session_deselects_nothing():
    noxfile = _read(os.path.join(ROOT, "noxfile.py"))
    assert "--deselect" not in noxfile and "deselect" not in re.sub(r"#.*", "", noxfile)
    ci = glob.glob(os.path.join(ROOT, ".ci", "**", "*"), recursive=True) + glob.glob(os.path.join(ROOT, ".github", "**", "*"), recursive=True)
    assert not [p for p in ci if os.path.isfile(p) and "--deselect" in _read(p)]


#: core's stage folders: their modules are core's internals, which packs do not import
CORE_STAGES = ("export", "lower", "passes", "precision", "verification")
#: core's CLI modules: internals too; a pack's verb takes what it needs from ``jax2onnx.cli`` itself
CLI_MODULES = tuple(sorted(os.path.splitext(os.path.basename(p))[0]
                           for p in glob.glob(os.path.join(CORE_SRC, "cli", "*.py")) if not p.endswith("__init__.py")))


def _imported_modules(path: str) -> list[tuple[int, str]]:
    """(line, module) of every import in ``path``, wherever the statement stands."""
    found = []
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found += [(node.lineno, node.module)]
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
    return found


def test_packs_use_cores_public_modules_only():
    """A pack's code (and the template users copy) imports core through its public modules
    (``jax2onnx``, ``jax2onnx.frontend``, ``plugin``, ``fusion``, ``testing``, ``targets``, ...), never a
    stage's internals: the staged API (``jax2onnx.ExportProgram``) is how a front-end runs an export.
    A pack's CLI verb imports ``jax2onnx.cli`` (``CliError``, ``check_writable``, ``load_target``),
    not the CLI's modules (``jax2onnx.cli.commands``, ``jax2onnx.cli.usage``, ...)."""
    sources = [p for p in glob.glob(os.path.join(ROOT, "packages", "*", "src", "**", "*.py"), recursive=True)
               if not p.startswith(CORE_SRC)]
    sources += glob.glob(os.path.join(ROOT, "templates", "plugin-pack", "**", "*.py"), recursive=True)
    assert len(sources) > 100, len(sources)
    assert {"commands", "usage"} <= set(CLI_MODULES), CLI_MODULES
    stage = re.compile(r"^jax2onnx\.(" + "|".join(CORE_STAGES) + r"|cli\.(" + "|".join(CLI_MODULES) + r"))(\.|$)")
    found = [f"{os.path.relpath(path, ROOT)}:{line}: {module}" for path in sources
             for line, module in _imported_modules(path) if stage.match(module)]
    assert not found, "\n".join(found)


def _import_graph_scan():
    """Core's import-graph test module (the scan it runs on core), loaded from its file."""
    path = os.path.join(ROOT, "packages", "core", "tests", "test_import_graph.py")
    spec = importlib.util.spec_from_file_location("core_import_graph_scan", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pack_sources() -> dict[str, str]:
    """import name -> source folder of every package under packages/ except core."""
    return {os.path.basename(p): p for p in sorted(glob.glob(os.path.join(ROOT, "packages", "*", "src", "*")))
            if os.path.isdir(p) and os.path.basename(p).startswith("jax2onnx_")}


def test_no_import_cycle_in_any_pack():
    """Every import counts (function-local ones too): a circle is broken by moving the shared piece
    into a lower module, not by hiding an import inside a function. A statement naming the module's
    own package (``from . import sibling``, ``from .. import x``) is an edge to that package, whose
    ``__init__`` may import the module: import a sibling by its own name (``from .sibling import f``)."""
    scan = _import_graph_scan()
    sources = _pack_sources()
    assert {"jax2onnx_lax", "jax2onnx_llm", "jax2onnx_examples"} <= set(sources), sources
    found = {}
    for package, folder in sources.items():
        graph = scan.import_graph(pathlib.Path(folder), package)
        assert len(graph) > 1, f"{package}: the scan read no modules"
        cycle = scan.find_cycle(graph)
        if cycle:
            found[package] = " -> ".join(cycle)
    assert not found, f"import cycles: {found}"


#: Max lines of a source file: a longer one holds more than one concern.
MAX_SOURCE_LINES = 800
#: Files allowed over the limit until their split lands, each with the issue tracking it (none now).
OVER_LIMIT_ALLOWED: set[str] = set()


def test_no_source_file_over_800_lines():
    sources = [*glob.glob(os.path.join(ROOT, "packages", "*", "src", "**", "*.py"), recursive=True),
               *glob.glob(os.path.join(ROOT, "templates", "*", "src", "**", "*.py"), recursive=True)]
    assert len(sources) > 100, len(sources)
    lengths = {os.path.relpath(p, ROOT).replace(os.sep, "/"): len(_read(p).splitlines()) for p in sources}
    over = {p: n for p, n in lengths.items() if n > MAX_SOURCE_LINES and p not in OVER_LIMIT_ALLOWED}
    assert not over, f"source files over {MAX_SOURCE_LINES} lines (split them by concern): {over}"
    stale = [p for p in OVER_LIMIT_ALLOWED if lengths.get(p, 0) <= MAX_SOURCE_LINES]
    assert not stale, f"no longer over the limit (or gone): remove from OVER_LIMIT_ALLOWED: {stale}"


def _imported_top_names(folder: str) -> dict[str, list[str]]:
    """Top-level ``jax2onnx*`` package -> the files (relative to ``folder``) importing it, anywhere in them."""
    found: dict[str, list[str]] = {}
    for path in sorted(glob.glob(os.path.join(folder, "**", "*.py"), recursive=True)):
        for node in _nodes(path):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top.startswith("jax2onnx"):
                    found.setdefault(top, []).append(os.path.relpath(path, folder))
    return found


def _declared(pyproject: str) -> set[str]:
    """Distribution names a pyproject declares, as dependencies or in any optional extra."""
    from packaging.requirements import Requirement

    with open(pyproject, "rb") as f:
        project = tomllib.load(f)["project"]
    reqs = [*project.get("dependencies", []), *(r for extra in project.get("optional-dependencies", {}).values() for r in extra)]
    return {Requirement(r).name for r in reqs}


def test_each_pack_declares_the_packs_it_imports():
    """A pack that imports another pack's (or core's) modules names that distribution in its
    pyproject, as a dependency or an optional extra (then the importing module says which extra
    to install when it is missing, as jax2onnx_examples.llama does)."""
    dist_of = {import_name: dist for dist, import_name in _packs().items()}
    dist_of["jax2onnx"] = "jax2onnx-core"
    problems = []
    checked = 0
    for package, folder in _pack_sources().items():
        pyproject = os.path.join(os.path.dirname(os.path.dirname(folder)), "pyproject.toml")
        declared = _declared(pyproject)
        for top, files in _imported_top_names(folder).items():
            if top == package:
                continue
            checked += 1
            dist = dist_of.get(top)
            if dist is None:
                problems.append(f"{package} imports {top} ({files[0]}), which no distribution under packages/ provides")
            elif dist not in declared:
                problems.append(f"{package} imports {top} ({', '.join(sorted(set(files)))}) but "
                                f"{os.path.relpath(pyproject, ROOT)} does not declare {dist}")
    assert checked >= 10, checked  # every pack imports core at least
    assert not problems, "\n".join(problems)


#: the modules that hold onnxruntime's kernel facts: its measured tables and the loaders of the
#: installed one's (``jax2onnx.ir.runtime``), and the probe measuring them
KERNEL_TABLE_MODULES = ("jax2onnx.ir.runtime", "jax2onnx.ir.kernel_probe")
#: where they may be imported: the targets (each serves its kernel table, ``Target.runtime()``) and ir/ itself
KERNEL_TABLE_READERS = ("core/src/jax2onnx/targets/", "core/src/jax2onnx/ir/")


def _absolute_imports(path: str) -> list[tuple[int, str]]:
    """(line, dotted module) of every import in ``path``, relative ones resolved against its package
    (``from ..ir import runtime`` in ``jax2onnx.lower.x`` → ``jax2onnx.ir.runtime``)."""
    rel = os.path.relpath(path, os.path.join(ROOT, "packages")).replace(os.sep, "/")
    parts = rel.split("/")[2:]  # <package>/src/<module path>
    package = parts[:-1]  # a module's package (an __init__'s is its own folder too)
    found = []
    for node in _nodes(path):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join([*base, *([node.module] if node.module else [])])
            found += [(node.lineno, module), *((node.lineno, f"{module}.{a.name}") for a in node.names)]
    return found


def test_only_targets_read_the_kernel_tables():
    """What a runtime can run is the target's (docs/architecture.md, "Adding a target"): the
    lowering, the passes, the precision stage and verification ask ``Target.runtime()`` and
    ``Target.providers``; no module outside ``targets/`` (and ``ir/``, which defines them) imports the
    kernel-table modules, so a target with a table of its own changes what every stage reads."""
    sources = [*glob.glob(os.path.join(ROOT, "packages", "*", "src", "**", "*.py"), recursive=True),
               *glob.glob(os.path.join(ROOT, "templates", "*", "src", "**", "*.py"), recursive=True)]
    assert len(sources) > 100, len(sources)
    readers = []
    found = []
    for path in sources:
        rel = os.path.relpath(path, os.path.join(ROOT, "packages")).replace(os.sep, "/")
        hits = [(line, m) for line, m in _absolute_imports(path) if m.startswith(KERNEL_TABLE_MODULES)]
        if rel.startswith(KERNEL_TABLE_READERS):
            readers += [rel for _ in hits]
        else:
            found += [f"{os.path.relpath(path, ROOT)}:{line}: {m}" for line, m in hits]
    assert any(r.startswith("core/src/jax2onnx/targets/") for r in readers), readers  # the scan sees the targets' imports
    assert not found, "ask the export's target (ctx.runtime, Target.runtime()) instead:\n" + "\n".join(found)

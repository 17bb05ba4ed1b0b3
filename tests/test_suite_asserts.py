"""No test that cannot fail because its checks never run: a test function whose every check sits
under an ``if``, a loop that may run zero times, or an ``except`` passes without checking anything
when the condition is false or the iterable empty (``for node in model.graph.node: if node.op_type
== "X": assert ...`` passes on a model without X).

The scanner reads every test file (``packages/*/tests*``, ``tests/``, ``templates/*/tests``) and
lists test functions with a check but none that always runs. A check is an ``assert``, a call
whose name says it checks (``assert*``, ``check*``, ``expect*``, ``compare*``, ``*_assert*``,
``*_check*``, ``*_compare*``; not ``verify``, which returns a report to assert on), or
``pytest.raises``/``warns``/``fail``/``skip``/``importorskip``. Runs for sure: the function body,
``with``, ``try`` and ``finally`` bodies, ``while True``, and loops over a literal that is not empty
(``for dtype in (np.float32, np.float16)``, ``range(3)``, or a name bound once to such a literal).
A test with such a check after its loop (``assert found``) passes. Justified exceptions go in
:data:`ALLOWED`, each with its reason.

    python tests/test_suite_asserts.py      # lists the candidates
"""

from __future__ import annotations

import ast
import glob
import os
import re

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

#: "path::test_name" -> why its checks may all sit under a condition
ALLOWED: dict[str, str] = {
    "tests/test_guide.py::test_guide_page_runs":
        "runs a page's python blocks with exec (PAGES keeps the pages that have some): the check is that no "
        "block raises, and the blocks hold their own asserts",
    "tests/test_pack_readmes.py::test_readme_runs_as_written":
        "runs a README's python blocks with exec (parametrized over READMEs that have some): the check is that "
        "no block raises; the onnx.checker loop is extra",
    "tests/test_readme.py::test_readme_block_runs":
        "runs one README block with exec (one per parametrized index): the check is that it raises nothing; "
        "what follows checks the files a block wrote, where it writes any",
}

_CHECK_NAME = re.compile(r"^_*(assert|check|expect|compare)|_(assert|check|compare)", re.IGNORECASE)
_PYTEST_CHECKS = {"raises", "warns", "fail", "skip", "importorskip", "xfail", "deprecated_call"}


def suite_files() -> list[str]:
    patterns = ("packages/*/tests*/**/test_*.py", "packages/*/tests*/**/*_test.py", "tests/**/test_*.py",
                "templates/*/tests/**/test_*.py")
    return sorted({p for pattern in patterns for p in glob.glob(os.path.join(ROOT, pattern), recursive=True)})


def _call_name(call: ast.Call) -> tuple[str, str]:
    """(the object's name or "", the called name) of ``obj.name(...)`` / ``name(...)``."""
    func = call.func
    if isinstance(func, ast.Attribute):
        owner = func.value.id if isinstance(func.value, ast.Name) else ""
        return owner, func.attr
    if isinstance(func, ast.Name):
        return "", func.id
    return "", ""


def _is_check(node: ast.AST) -> bool:
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.Call):
        owner, name = _call_name(node)
        return (owner == "pytest" and name in _PYTEST_CHECKS) or bool(_CHECK_NAME.search(name))
    return False


def _literals(body: list[ast.stmt]) -> dict[str, ast.expr]:
    """Names bound once, at the top of ``body``, to a literal collection: ``CASES = {...}``."""
    bound: dict[str, list[ast.expr]] = {}
    for node in body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    bound.setdefault(target.id, []).append(node.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            bound.setdefault(node.target.id, []).append(node.value)
    literal = (ast.List, ast.Tuple, ast.Set, ast.Dict)
    return {name: values[0] for name, values in bound.items() if len(values) == 1 and isinstance(values[0], literal)}


#: the literal collections in scope of the function being scanned (its own, then its module's)
_SCOPE: dict[str, ast.expr] = {}


def _always_iterates(iterable: ast.expr) -> bool:
    """A loop over a non-empty literal (or ``range`` of a positive constant, or a name bound once to
    such a literal, or its ``.items()``/``.keys()``/``.values()``) runs its body."""
    if isinstance(iterable, ast.Call) and isinstance(iterable.func, ast.Attribute) and not iterable.args \
            and iterable.func.attr in ("items", "keys", "values"):
        iterable = iterable.func.value
    if isinstance(iterable, ast.Name) and iterable.id in _SCOPE:
        iterable = _SCOPE[iterable.id]
    if isinstance(iterable, (ast.List, ast.Tuple, ast.Set)):
        return bool(iterable.elts)
    if isinstance(iterable, ast.Dict):
        return bool(iterable.keys)
    if isinstance(iterable, ast.Constant) and isinstance(iterable.value, str):
        return bool(iterable.value)
    if isinstance(iterable, ast.Call) and _call_name(iterable) in (("", "range"), ("", "enumerate"), ("", "zip"), ("", "sorted")):
        args = iterable.args
        if _call_name(iterable) == ("", "range"):
            return bool(args) and all(isinstance(a, ast.Constant) and isinstance(a.value, int) for a in args) and len(
                range(*[a.value for a in args])) > 0
        return bool(args) and all(_always_iterates(a) for a in args)
    return False


def _checks(nodes: list[ast.stmt] | list[ast.AST], sure: bool, found: list[bool]) -> None:
    """Append, for every check under ``nodes``, whether it always runs (``sure`` so far)."""
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue  # a nested helper runs only if called; its call is what counts
        if isinstance(node, ast.If):
            always = isinstance(node.test, ast.Constant) and bool(node.test.value)
            _expr_checks(node.test, sure, found)
            _checks(node.body, sure and always, found)
            _checks(node.orelse, False, found)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            _expr_checks(node.iter, sure, found)
            _checks(node.body, sure and _always_iterates(node.iter), found)
            _checks(node.orelse, sure, found)
        elif isinstance(node, ast.While):
            always = isinstance(node.test, ast.Constant) and bool(node.test.value)
            _checks(node.body, sure and always, found)
            _checks(node.orelse, False, found)
        elif isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
            _checks(node.body, sure, found)
            for handler in node.handlers:
                _checks(handler.body, False, found)
            _checks(node.orelse, False, found)
            _checks(node.finalbody, sure, found)
        elif isinstance(node, ast.Match):
            for case in node.cases:
                _checks(case.body, False, found)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                _expr_checks(item.context_expr, sure, found)
            _checks(node.body, sure, found)
        else:
            _expr_checks(node, sure, found)


def _expr_checks(node: ast.AST, sure: bool, found: list[bool]) -> None:
    """Checks inside one statement or expression (a conditional expression's branches may not run)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return
    if _is_check(node):
        found.append(sure)
    if isinstance(node, ast.IfExp):
        _expr_checks(node.test, sure, found)
        _expr_checks(node.body, False, found)
        _expr_checks(node.orelse, False, found)
        return
    if isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
        sure = sure and all(_always_iterates(g.iter) and not g.ifs for g in node.generators)
    for child in ast.iter_child_nodes(node):
        _expr_checks(child, sure, found)


def candidates() -> list[str]:
    """``path::test_name`` of every test function with checks, none of which always runs."""
    out = []
    for path in suite_files():
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
        rel = os.path.relpath(path, ROOT)
        module = _literals(tree.body)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
                found = _found_checks(node, module)
                if found and not any(found):
                    out.append(f"{rel}::{node.name}")
    return out


def _found_checks(function: ast.FunctionDef | ast.AsyncFunctionDef, module: dict[str, ast.expr]) -> list[bool]:
    """Per check of ``function``: whether it always runs."""
    assigned = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    _SCOPE.clear()
    _SCOPE.update({name: value for name, value in module.items() if name not in assigned})  # not shadowed
    _SCOPE.update(_literals(function.body))
    found: list[bool] = []
    _checks(function.body, True, found)
    return found


def test_every_test_has_a_check_that_always_runs():
    found = candidates()
    new = [c for c in found if c not in ALLOWED]
    assert not new, ("tests whose every check sits under an if, a loop or an except (assert the condition "
                     "held or the loop ran, or add them to ALLOWED with the reason):\n  " + "\n  ".join(new))


def test_the_allow_list_names_only_such_tests():
    stale = sorted(set(ALLOWED) - set(candidates()))
    assert not stale, f"ALLOWED names tests that no longer need it (or no longer exist): {stale}"


def test_the_scanner_finds_a_check_only_under_a_condition(tmp_path):
    source = '''
def test_only_in_loop(model):
    for node in model.graph.node:
        if node.op_type == "X":
            assert node.attribute
def test_loop_then_found(model):
    found = [n for n in model.graph.node if n.op_type == "X"]
    for node in found:
        assert node.attribute
    assert found
def test_literal_loop():
    for dtype in ("float32", "float16"):
        check_dtype(dtype)
def test_named_literal_loop():
    cases = {"a": 1, "b": 2}
    for name, value in cases.items():
        assert value, name
def test_rebound_name_loop(model):
    cases = {"a": 1}
    cases = model.cases
    for name in cases:
        assert name
def test_only_in_except():
    try:
        run()
    except ValueError as err:
        assert "bad" in str(err)
def test_nested_helper_only():
    def helper():
        assert False
def test_raises():
    with pytest.raises(ValueError):
        run()
'''
    tree = ast.parse(source)
    verdicts = {}
    for node in tree.body:
        found = _found_checks(node, {})
        verdicts[node.name] = (bool(found), any(found))
    assert verdicts == {
        "test_only_in_loop": (True, False),
        "test_loop_then_found": (True, True),
        "test_literal_loop": (True, True),
        "test_named_literal_loop": (True, True),
        "test_rebound_name_loop": (True, False),  # bound twice: not known to be the literal
        "test_only_in_except": (True, False),
        "test_nested_helper_only": (False, False),  # no check of its own: not this scanner's case
        "test_raises": (True, True),
    }


if __name__ == "__main__":  # pragma: no cover
    print("\n".join(candidates()))

"""pytest plugin (entry point ``pytest11``): every installed pack's testcases become tests.

A test module opts in by naming the packs it covers and using the ``jax2onnx_variant`` argument::

    JAX2ONNX_PACKS = ["jax2onnx-mypack"]

    def test_testcase(jax2onnx_variant):
        run_variant(jax2onnx_variant)

Options: ``--jax2onnx-report=PATH`` writes ``{test id: "passed"|"failed"|"skipped"}`` as JSON
(the coverage tables read it; a test over several opsets is recorded under its first's id);
``--jax2onnx-opset=N`` exports every variant at opset N instead of the default (ids get ``_opsetN``),
and a comma list (``default,17,13``) exports every variant at each of them in one test (id
``<variant>+opset17+opset13``), whose JAX reference is computed once for all (most of a testcase's
time; :attr:`jax2onnx.testing.Variant.more_opsets`); ``-k`` selects by testcase name as usual.

Ini option ``jax2onnx_xla_flags``: XLA flags added to ``XLA_FLAGS`` before any conftest or test
module is imported, so before JAX's first compilation (XLA reads the variable once, then). A
repository puts cheaper-to-compile settings for JAX's side of the comparisons there (this one's
pyproject.toml does); a flag already named in ``XLA_FLAGS`` keeps the value given there, and
``-o jax2onnx_xla_flags=`` turns them off for one run.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

import pytest

# Core's modules are imported inside the hooks, never here: pytest imports this plugin (entry point
# pytest11) at the start of every session in an environment with jax2onnx, before XLA_FLAGS are set
# and before any conftest, and importing jax2onnx imports JAX. (The one exception to core's rule of
# module-level imports; tests/test_import_graph.py names it.)

_RESULTS: dict[str, dict[str, Any]] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("jax2onnx")
    group.addoption("--jax2onnx-report", default=None, help="write testcase outcomes as JSON to this path")
    group.addoption("--jax2onnx-opset", default=None, type=_opsets_option,
                    help="export every testcase variant at this opset, or at each of a comma list "
                         "('default' is to_onnx's default; e.g. default,17,13)")
    parser.addini("jax2onnx_xla_flags", type="args", default=[],
                  help="XLA flags added to XLA_FLAGS before JAX first compiles (those XLA_FLAGS names already win)")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    # The earliest hook a plugin gets: conftest files and test modules, which may compute with JAX
    # at import, come after it. xdist workers run it too and find the flags inherited.
    flags = early_config.getini("jax2onnx_xla_flags")
    if flags:
        os.environ["XLA_FLAGS"] = with_xla_flags(os.environ.get("XLA_FLAGS", ""), flags)


def with_xla_flags(current: str, flags: list[str]) -> str:
    """``current`` (an ``XLA_FLAGS`` value) plus those of ``flags`` whose name it does not set."""
    named = {f.split("=", 1)[0] for f in current.split()}
    added = [f for f in flags if f.split("=", 1)[0] not in named]
    return " ".join([*current.split(), *added])


def pytest_configure(config: pytest.Config) -> None:
    # The folder the session's processes share JAX's outputs through (jax2onnx.testing.references),
    # made by the controller before it starts the xdist workers, which inherit the variable.
    if hasattr(config, "workerinput"):
        return
    from jax2onnx.testing.references import FOLDER_VARIABLE

    if not os.environ.get(FOLDER_VARIABLE):
        import tempfile

        os.environ[FOLDER_VARIABLE] = _MADE["references"] = tempfile.mkdtemp(prefix="jax2onnx-references-")


def pytest_unconfigure(config: pytest.Config) -> None:
    folder = _MADE.pop("references", None)
    if folder is not None:
        import shutil

        from jax2onnx.testing.references import FOLDER_VARIABLE

        shutil.rmtree(folder, ignore_errors=True)
        if os.environ.get(FOLDER_VARIABLE) == folder:
            del os.environ[FOLDER_VARIABLE]


#: what this process made for the session (removed at its end)
_MADE: dict[str, str] = {}


def pytest_report_header(config: pytest.Config) -> str | None:
    if config.getini("jax2onnx_xla_flags"):
        return f"jax2onnx: XLA_FLAGS={os.environ.get('XLA_FLAGS', '')}"
    return None


def _opsets_option(text: str) -> tuple[int | None, ...]:
    """``"17"`` -> (17,); ``"default,17,13"`` -> (None, 17, 13): None is to_onnx's default opset."""
    import argparse

    from jax2onnx.ir.opsets import MIN_OPSET, max_opset

    out: list[int | None] = []
    for token in (t.strip() for t in text.split(",")):
        if token == "default":
            opset = None
        else:
            try:
                opset = int(token)
            except ValueError:
                raise argparse.ArgumentTypeError(
                    f"an opset number from {MIN_OPSET} to {max_opset()} or 'default' (comma-separated), got {token!r}") from None
            if not MIN_OPSET <= opset <= max_opset():
                raise argparse.ArgumentTypeError(f"opset {opset} is outside the supported {MIN_OPSET}..{max_opset()}")
        if opset in out:
            raise argparse.ArgumentTypeError(f"opset {token} is named twice in {text!r}")
        out.append(opset)
    return tuple(out)


def collect_variants(packs: list[str] | None, opset: int | None | tuple[int | None, ...] = None) -> list[Any]:
    """Every variant of the installed packs' testcases (``packs``: only these), at ``opset``, or at
    the first of a tuple of opsets and then the others (``Variant.more_opsets``)."""
    from jax2onnx.lower.registry import get_registry
    from jax2onnx.testing.runner import variants_of

    first, *more = opset if isinstance(opset, tuple) else (opset,)
    out = []
    seen: set[str] = set()
    for pack, comp in get_registry().components():
        if packs is not None and pack not in packs:
            continue
        for case in comp.testcases:
            for base in variants_of(case, pack, comp.name):
                v = dataclasses.replace(base, opset=first, more_opsets=tuple(more))
                key = f"{comp.name}::{v.id}"
                if key in seen:
                    continue
                seen.add(key)
                out.append(v)
    return out



def selected_variants(pack: str, cases: dict[str, list[str]]) -> list[Any]:
    """``pytest.param`` for every variant (``_dynamic``, ``_f64``) of the testcases of ``pack`` named
    in ``cases`` (component -> testcase names), to run them again under other settings. A name that
    no longer exists fails the collection, naming it: a renamed or moved testcase cannot silently
    drop out of the selection."""
    wanted = {(comp, name) for comp, names in cases.items() for name in names}
    out, found = [], set()
    for v in collect_variants([pack]):
        key = (v.component, v.id.removesuffix("_f64").removesuffix("_dynamic"))
        if key in wanted:
            found.add(key)
            out.append(pytest.param(v, id=f"{v.component}::{v.id}"))
    if wanted - found:
        raise LookupError(f"testcases of {pack} renamed or moved, update the selection: {sorted(wanted - found)}")
    return out

def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "jax2onnx_variant" not in metafunc.fixturenames:
        return
    packs = getattr(metafunc.module, "JAX2ONNX_PACKS", None)
    opsets = metafunc.config.getoption("--jax2onnx-opset", default=None)
    variants = collect_variants(list(packs) if packs is not None else None, opsets)

    def test_id(v: Any) -> str:
        return f"{v.component}::{v.id}" + "".join(f"+opset{o or 'default'}" for o in v.more_opsets)

    params = [pytest.param(v, id=test_id(v), marks=[pytest.mark.skip(reason=v.case.skip_reason)] if v.case.skip_reason else [])
              for v in variants]
    metafunc.parametrize("jax2onnx_variant", params)


_RESULT_PROPERTY = "jax2onnx_result"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    outcome = yield
    report = outcome.get_result()
    variant = getattr(item, "callspec", None) and item.callspec.params.get("jax2onnx_variant")
    if variant is None:
        return
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        # Carried on the report, so under pytest-xdist it reaches the controller, which alone
        # writes the file (workers writing it concurrently would lose each other's results).
        report.user_properties.append((_RESULT_PROPERTY, {
            "component": variant.component,
            "testcase": variant.id,
            "pack": variant.pack,
            "outcome": report.outcome,
        }))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    for name, value in getattr(report, "user_properties", ()):
        if name == _RESULT_PROPERTY and isinstance(value, dict):
            _RESULTS[f"{value['component']}::{value['testcase']}"] = value


def pytest_sessionfinish(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller writes the report
        return
    path = session.config.getoption("--jax2onnx-report", default=None)
    if path and _RESULTS:
        existing: dict[str, Any] = {}
        try:
            with open(path, encoding="utf-8") as f:
                existing = json.load(f)
        except (OSError, ValueError):
            existing = {}
        existing.update(_RESULTS)
        from .results import ENVIRONMENT_KEY, environment

        existing[ENVIRONMENT_KEY] = environment()
        with open(path, "w", encoding="utf-8") as f:
            json.dump(existing, f, indent=1, sort_keys=True)

"""The coverage tables: pack metadata + a results file → markdown with ✅/❌/➖ per variant."""

from __future__ import annotations

import json

import pytest
from jax2onnx import hookimpl
from jax2onnx import testing as jt  # not `Testcase` by name: pytest would try to collect it
from jax2onnx.cli import main as cli_main
from jax2onnx.cli.coverage import ENVIRONMENT_KEY, FAILED, NOT_RUN, PASSED, render, write_docs
from jax2onnx.lower.registry import PluginRegistry
from mini_pack import registry_in_use


class _FakePack:
    @hookimpl
    def jax2onnx_components(self):
        return [
            jt.Component(
                "fake.sin",
                onnx=["Sin"],
                since="v0.1.0",
                testcases=[
                    jt.Testcase("sin_ok", lambda x: x, [("B", 3)]),  # static + dynamic, f32 + f64
                    jt.Testcase("sin_static", lambda x: x, [(3,)], run_f64=False),
                ],
            ),
            jt.Component("FakeModel", onnx=["Gemm"], since="v0.2.0", kind="example", description="a model | with a pipe",
                      testcases=[jt.Testcase("fake_model", lambda x: x, [(2,)], run_f64=False)]),
        ]


def _registry():
    return PluginRegistry(entry_points=[], extra_plugins=[("jax2onnx-fake", _FakePack())])


def _row(text: str, name: str) -> str:
    rows = [line for line in text.splitlines() if line.startswith(f"| `{name}`")]
    assert len(rows) == 1, rows
    return rows[0]


def _results(tmp_path, outcomes):
    path = tmp_path / "results.json"
    records = {k: {"component": k.split("::")[0], "testcase": k.split("::")[1], "pack": "jax2onnx-fake", "outcome": v}
               for k, v in outcomes.items()}
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def test_passed_failed_and_missing_variants_render_as_symbols(tmp_path):
    path = _results(tmp_path, {
        "fake.sin::sin_ok": "passed",
        "fake.sin::sin_ok_dynamic": "failed",
        "fake.sin::sin_ok_f64": "skipped",
        # sin_ok_dynamic_f64 and sin_static missing: never run
        "FakeModel::fake_model": "passed",
    })
    text = render(str(path), registry=_registry())
    row = _row(text, "fake.sin")
    assert f"`sin_ok` {PASSED}" in row
    assert f"`sin_ok_dynamic` {FAILED}" in row
    assert f"`sin_ok_f64` {NOT_RUN}" in row
    assert f"`sin_ok_dynamic_f64` {NOT_RUN}" in row
    assert f"`sin_static` {NOT_RUN}" in row
    assert "sin_static_dynamic" not in row and "sin_static_f64" not in row  # variants that do not exist
    assert "`Sin`" in row and row.rstrip(" |").endswith("v0.1.0")


def test_examples_go_to_their_own_table(tmp_path):
    text = render(str(_results(tmp_path, {"FakeModel::fake_model": "failed"})), registry=_registry())
    components, examples = text.split("## Examples")
    assert "`fake.sin`" in components and "`FakeModel`" not in components
    row = _row(examples, "FakeModel")
    assert f"`fake_model` {FAILED}" in row
    assert "a model \\| with a pipe" in row  # a pipe in a description must not break the table
    assert row.count(" | ") == 4  # five columns: Component | Description | ONNX ops | Testcases | Since


def test_missing_results_file_shows_everything_as_not_run(tmp_path):
    text = render(str(tmp_path / "nope.json"), registry=_registry())
    assert PASSED not in _row(text, "fake.sin") and FAILED not in _row(text, "fake.sin")
    assert f"`sin_ok` {NOT_RUN}" in _row(text, "fake.sin")


def test_plain_outcome_strings_are_accepted(tmp_path):
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"fake.sin::sin_static": "passed"}), encoding="utf-8")
    assert f"`sin_static` {PASSED}" in _row(render(str(path), registry=_registry()), "fake.sin")


def test_write_docs_and_cli(tmp_path, monkeypatch):
    path = _results(tmp_path, {"fake.sin::sin_ok": "passed"})
    out = tmp_path / "docs" / "coverage.md"
    text = write_docs(str(path), str(out), registry=_registry())
    assert out.read_text(encoding="utf-8") == text

    with registry_in_use(("jax2onnx-fake", _FakePack())):
        cli_out = tmp_path / "cli.md"
        assert cli_main(["coverage", "--results", str(path), "--output", str(cli_out)]) == 0
        assert f"`sin_ok` {PASSED}" in _row(cli_out.read_text(encoding="utf-8"), "fake.sin")


_CONFTEST = '''
from jax2onnx import hookimpl
from jax2onnx import testing as jt
from jax2onnx.lower.registry import PluginRegistry, set_registry


class FakePack:
    @hookimpl
    def jax2onnx_components(self):
        return [jt.Component("fake.op", testcases=[jt.Testcase("good", lambda x: x, [("B", 3)]),
                                                     jt.Testcase("bad", lambda x: x, [(3,)])])]


set_registry(PluginRegistry(entry_points=[], extra_plugins=[("jax2onnx-fake", FakePack())]))
'''

_TESTS = '''
JAX2ONNX_PACKS = ["jax2onnx-fake"]


def test_variant(jax2onnx_variant):
    assert jax2onnx_variant.case.name != "bad"
'''


def _run_pytest_with_report(tmp_path, *extra, output: list[str] | None = None):
    """The report of a pytest run over the fake pack's tests; its stdout appended to ``output``."""
    import subprocess
    import sys

    (tmp_path / "conftest.py").write_text(_CONFTEST, encoding="utf-8")
    (tmp_path / "test_fake.py").write_text(_TESTS, encoding="utf-8")
    report = tmp_path / "report.json"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *extra,
                           f"--jax2onnx-report={report}", str(tmp_path)], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    if output is not None:
        output.append(done.stdout)
    return json.loads(report.read_text(encoding="utf-8"))


def _expected_outcomes():
    return {"fake.op::good": "passed", "fake.op::good_dynamic": "passed", "fake.op::good_f64": "passed",
            "fake.op::good_dynamic_f64": "passed", "fake.op::bad": "failed", "fake.op::bad_f64": "failed"}


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory):
    """One pytest run of the fake pack's tests, as `nox -s tests` runs them: under pytest-xdist (where
    workers run the tests and only the controller may write the report) and over several opsets.
    The tests below read different facts off it; each fresh run costs three Pythons importing jax,
    so it is made once per session (``built_once``: under xdist this module's tests may land on
    different workers, and the first to ask runs it for all).
    -rA: one summary line per test run ("PASSED <id>", "FAILED <id> - ..."), read for the test ids."""
    import importlib.util

    def run(folder):
        extra = ["-n", "2"] if importlib.util.find_spec("xdist") else []
        output: list[str] = []
        results = _run_pytest_with_report(folder, *extra, "-rA", "--jax2onnx-opset=default,17,13", output=output)
        return results, output[0]

    folder, (results, output) = jt.built_once("coverage-plugin-run", run, jt.xdist_session_folder(tmp_path_factory))
    return folder / "report.json", results, output


def test_pytest_plugin_report_feeds_the_tables(plugin_run):
    """Every variant's outcome reaches the report, also under pytest-xdist (where workers run the
    tests and only the controller may write the file)."""
    report, results, _ = plugin_run
    results = dict(results)
    environment = results.pop(ENVIRONMENT_KEY)
    assert {k: v["outcome"] for k, v in results.items()} == _expected_outcomes()
    # the versions the outcomes were produced with travel in the report and head the tables
    import jax

    assert environment["jax"] == jax.__version__ and "onnx" in environment and "python" in environment
    legend = next(line for line in render(str(report), registry=_registry()).splitlines() if "Produced with" in line)
    assert f"jax {jax.__version__}" in legend and f"python {environment['python']}" in legend, legend


def test_a_run_over_several_opsets_reports_the_default_opsets_outcomes(plugin_run):
    """`--jax2onnx-opset=default,17,13` (what `nox -s tests` runs) keeps the report's keys those of
    the default opset, the ones the coverage tables read; one test per variant runs the three."""
    _, results, output = plugin_run
    results = dict(results)
    results.pop(ENVIRONMENT_KEY)
    assert {k: v["outcome"] for k, v in results.items()} == _expected_outcomes()
    import re

    ids = re.findall(r"^(?:PASSED|FAILED) \S*test_variant\[([^\]]+)\]", output, flags=re.M)
    assert sorted(ids) == sorted(f"{key}+opset17+opset13" for key in _expected_outcomes()), ids  # one test per variant

"""Coverage tables: every installed pack's components and examples with the last test run's outcome.

    pytest --jax2onnx-report=results.json ...        # core's pytest plugin records outcomes
    jax2onnx coverage --results results.json --output docs/coverage.md

The tables come from the packs' metadata (:class:`jax2onnx.testing.Component` and its testcases,
expanded into the same variants the pytest plugin runs), so a testcase that was never run shows
as ➖ rather than disappearing. Components with ``kind == "example"`` go to the Examples table.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from ..lower.registry import get_registry
from ..testing.results import ENVIRONMENT_KEY
from ..testing.runner import variants_of
from .usage import CliError, check_writable

PASSED, FAILED, NOT_RUN = "✅", "❌", "➖"

COMPONENTS_TITLE = "Supported JAX/ONNX components"
EXAMPLES_TITLE = "Examples"


def _read_report(results_path: str | os.PathLike[str] | None) -> Mapping[str, Any]:
    """A ``--jax2onnx-report`` file's JSON object; a missing path gives an empty one."""
    if results_path is None or not os.path.exists(results_path):
        return {}
    with open(results_path, encoding="utf-8") as f:
        raw = json.load(f)
    if not isinstance(raw, Mapping):
        raise ValueError(f"{results_path}: expected a JSON object of test outcomes, got {type(raw).__name__}")
    return raw


def _outcomes(raw: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in raw.items():
        outcome = value.get("outcome") if isinstance(value, Mapping) else value
        if isinstance(outcome, str):
            out[str(key)] = outcome
    return out


def load_results(results_path: str | os.PathLike[str] | None) -> dict[str, str]:
    """``{"component::variant_id": outcome}`` from a ``--jax2onnx-report`` file.

    Accepts both the plugin's records (``{"outcome": "passed", ...}``) and plain outcome strings.
    A missing path gives no results (every testcase then renders as not run).
    """
    return _outcomes(_read_report(results_path))


def _environment_of(raw: Mapping[str, Any]) -> dict[str, str]:
    """The versions a report's outcomes were produced with (empty if it names none)."""
    env = raw.get(ENVIRONMENT_KEY)
    return {str(k): str(v) for k, v in env.items()} if isinstance(env, Mapping) else {}


def status_symbol(outcome: str | None) -> str:
    if outcome == "passed":
        return PASSED
    if outcome in ("failed", "error"):
        return FAILED
    return NOT_RUN  # skipped, or not run at all


def _cell(text: str) -> str:
    """Markdown-table-safe text: no pipes or line breaks."""
    return " ".join(str(text).replace("|", "\\|").split())


def _testcase_cell(pack: str, component: Any, results: Mapping[str, str], counts: dict[str, int]) -> str:

    parts = []
    for case in component.testcases:
        for variant in variants_of(case, pack, component.name):
            symbol = status_symbol(results.get(f"{component.name}::{variant.id}"))
            counts[symbol] += 1
            parts.append(f"`{variant.id}` {symbol}")
    return " ".join(parts) if parts else NOT_RUN


def _table(rows: Iterable[tuple[str, Any]], results: Mapping[str, str], with_description: bool) -> tuple[list[str], dict[str, int]]:
    counts = {PASSED: 0, FAILED: 0, NOT_RUN: 0}
    header = ["Component", *(["Description"] if with_description else []), "ONNX ops", "Testcases", "Since"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for pack, comp in sorted(rows, key=lambda pc: (pc[1].name.lower(), pc[0])):
        ops = " ".join(f"`{_cell(op)}`" for op in comp.onnx)
        cells = [f"`{_cell(comp.name)}`"]
        if with_description:
            cells.append(_cell(comp.description))
        cells += [ops, _testcase_cell(pack, comp, results, counts), _cell(comp.since)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines, counts


def _summary(counts: Mapping[str, int]) -> str:
    return f"{counts[PASSED]} {PASSED} passed, {counts[FAILED]} {FAILED} failed, {counts[NOT_RUN]} {NOT_RUN} not run"


def render(results_path: str | os.PathLike[str] | None, registry: Any = None) -> str:
    """The two coverage tables as markdown, for the installed packs (or ``registry``)."""
    if registry is None:

        registry = get_registry()
    raw = _read_report(results_path)
    results = _outcomes(raw)
    pairs = registry.components()
    components = [(p, c) for p, c in pairs if getattr(c, "kind", "component") != "example"]
    examples = [(p, c) for p, c in pairs if getattr(c, "kind", "component") == "example"]
    environment = _environment_of(raw)
    comp_lines, comp_counts = _table(components, results, with_description=False)
    ex_lines, ex_counts = _table(examples, results, with_description=True)
    legend = (
        f"{PASSED} passed, {FAILED} failed, {NOT_RUN} not run (or skipped) in the last test run. "
        "`_dynamic`: symbolic dims; `_f64`: `enable_double_precision=True`."
    )
    if environment:
        legend += " Produced with " + ", ".join(f"{name} {version}" for name, version in environment.items()) + "."
    out = [
        "<!-- generated by `jax2onnx coverage`; do not edit by hand -->",
        "",
        f"## {COMPONENTS_TITLE}",
        "",
        legend,
        "",
        _summary(comp_counts),
        "",
        *comp_lines,
        "",
        f"## {EXAMPLES_TITLE}",
        "",
        _summary(ex_counts),
        "",
        *ex_lines,
        "",
    ]
    return "\n".join(out)


def write_docs(results_path: str | os.PathLike[str] | None, out_path: str | os.PathLike[str], registry: Any = None) -> str:
    """Render and write the tables to ``out_path`` (directories created); returns the markdown."""
    text = render(results_path, registry)
    directory = os.path.dirname(os.path.abspath(out_path))
    os.makedirs(directory, exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as f:
        f.write(text)
    return text


def _cmd_coverage(args: argparse.Namespace) -> int:
    if args.results is not None:  # a named file that is missing or not a report is a mistake, not "nothing ran"
        if not os.path.isfile(args.results):
            raise CliError(f"--results {args.results}: no such file; give the JSON that pytest "
                           "--jax2onnx-report=PATH wrote (or leave --results out: every testcase shows as not run)")
        try:
            _read_report(args.results)
        except (ValueError, UnicodeDecodeError) as exc:  # json.JSONDecodeError is a ValueError
            raise CliError(f"--results {args.results}: not a pytest --jax2onnx-report file ({exc})") from None
    if args.output:
        check_writable(args.output)
        write_docs(args.results, args.output)
        print(f"wrote {args.output}")
    else:
        print(render(args.results))
    return 0


def add_coverage_subcommand(subparsers: Any) -> argparse.ArgumentParser:
    """Add ``coverage`` to the ``jax2onnx`` CLI's subcommands."""
    parser = subparsers.add_parser("coverage", help="render the coverage tables from a test run's results")
    parser.add_argument("--results", "-r", default=None,
                        help="JSON written by pytest --jax2onnx-report=PATH (none: every testcase shows as not run)")
    parser.add_argument("--output", "-o", default=None, help="markdown file to write (default: print)")
    parser.set_defaults(func=_cmd_coverage)
    return parser


__all__ = ["add_coverage_subcommand", "load_results", "render", "status_symbol", "write_docs"]

"""Node counts of every installed pack's testcases, to show a graph-pass change regresses none.

    python bench/node_counts.py --out before.json            # one export per testcase
    python bench/node_counts.py --out after.json
    python bench/node_counts.py --compare before.json after.json --markdown bench/results/node_counts.md
    python bench/node_counts.py --part 0/2 --out a.json & python bench/node_counts.py --part 1/2 --out b.json
    python bench/node_counts.py --merge a.json b.json --out after.json      # the same, in two processes
    python bench/node_counts.py --pytest tests/test_rewrite_libraries.py --out suites.json  # the exports tests make

One variant per testcase: the symbolic float32 one where the testcase has symbols (shape
arithmetic is where duplicates and Identities appear), else the static one. Each entry holds the
main graph's node count, the total over every graph and function body and the count per op type
(``domain:op`` outside the standard domain), so a fused op traded for another shows; a failed
export is recorded as its error. ``--pytest`` runs test files in this process instead and records
every model an export optimizes (the LLM, Hugging Face and KerasHub suites build their models in
the tests), keyed by test id and export number. Exports only (no onnxruntime, no JAX run): the testcase suite checks the
numbers; this checks the structure across all of them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")


def count(out_path: str, select: str | None, every: int = 1, part: tuple[int, int] = (0, 1)) -> None:
    import warnings

    from jax2onnx import compat
    from jax2onnx.testing import runner

    try:
        from jax2onnx.ir.proto_walk import nodes
        from jax2onnx.lower.registry import get_registry
    except ImportError:  # the flat core before the stage folders (806f111), for a before/after run
        from jax2onnx.proto_walk import nodes
        from jax2onnx.registry import get_registry

    warnings.simplefilter("ignore")
    results: dict[str, object] = {}
    start = time.perf_counter()
    seen = 0
    for pack, comp in get_registry().components():
        for case in comp.testcases:
            if case.skip_reason:
                continue
            seen += 1
            if (seen - 1) % every:  # a deterministic sample: every N-th testcase in registry order
                continue
            if (seen - 1) // every % part[1] != part[0]:  # this process's share (--part I/N)
                continue
            variants = [v for v in runner.variants_of(case, pack, comp.name) if not v.double]
            variant = next((v for v in variants if v.symbolic), variants[0] if variants else None)
            if variant is None or (select and not any(part in variant.id for part in select.split(","))):
                continue
            key = f"{comp.name}::{variant.id}"
            try:
                with compat.x64_enabled(False):
                    fn = case.build()
                    model = runner._program(variant, fn, runner.variant_inputs(variant, fn)).model_proto
                results[key] = {"main": len(model.graph.node), "total": sum(1 for _ in nodes(model)),
                                "ops": _op_counts((n.domain, n.op_type) for n in nodes(model))}
            except Exception as exc:  # noqa: BLE001 - recorded, compared like a count
                results[key] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
            if len(results) % 25 == 0:  # a long run can be compared before it ends
                _write(out_path, results)
    _write(out_path, results)
    print(f"{len(results)} testcases in {time.perf_counter() - start:.0f} s -> {out_path}")


def _op_counts(ops) -> dict[str, int]:
    counts: dict[str, int] = {}
    for domain, op in ops:
        key = op if domain in ("", "ai.onnx") else f"{domain}:{op}"
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items()))


def count_pytest(out_path: str, test_args: list[str]) -> int:
    """Run pytest on ``test_args`` in this process and record every model the export's optimize
    stage returns, as ``<test id>#<n>`` (the n-th export of that test). Returns pytest's status."""
    import pytest
    from jax2onnx.export import program
    from jax2onnx.passes.manager import all_graphs

    results: dict[str, object] = {}
    optimize = program.optimize

    def counted(export, model):
        model = optimize(export, model)
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
        n = sum(1 for key in results if key.rsplit("#", 1)[0] == test)
        ops = [(node.domain, node.op_type) for graph in all_graphs(model) for node in graph]
        results[f"{test}#{n}"] = {"main": len(model.graph), "total": len(ops), "ops": _op_counts(ops)}
        if len(results) % 10 == 0:  # a long run can be compared before it ends
            _write(out_path, results)
        return model

    program.optimize = counted
    try:
        status = pytest.main(["-q", "-p", "no:cacheprovider", "-n", "0", *test_args])
    finally:
        program.optimize = optimize
    _write(out_path, results)
    print(f"{len(results)} exports -> {out_path} (pytest status {int(status)})")
    return int(status)


def _write(path: str, results: dict[str, object]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def compare(before_path: str, after_path: str, markdown: str | None = None) -> int:
    """Print (and with ``markdown`` write) the testcases whose counts changed and the totals over
    the testcases both sides exported; 1 when one got more nodes or a changed outcome."""
    with open(before_path, encoding="utf-8") as f:
        before = json.load(f)
    with open(after_path, encoding="utf-8") as f:
        after = json.load(f)
    worse, better, same, new, gone = [], [], 0, [], []
    totals = {"main": [0, 0], "total": [0, 0]}
    for key in sorted(set(before) | set(after)):
        if key not in before:
            new.append((key, after[key]))
            continue
        if key not in after:
            gone.append((key, before[key]))
            continue
        b, a = before[key], after[key]
        if "total" in b and "total" in a:
            for part in totals:
                totals[part][0] += b[part]
                totals[part][1] += a[part]
            if (a["main"], a["total"], a.get("ops")) == (b["main"], b["total"], b.get("ops")):
                same += 1
            elif a["total"] >= b["total"] and a["main"] >= b["main"]:  # more, or other ops
                worse.append((key, b, a))
            else:
                better.append((key, b, a))
        elif b != a:
            worse.append((key, b, a))
    lines = [f"- testcases: {len(before)} before, {len(after)} after; {same + len(better) + len(worse)} on both sides "
             f"(new only after: {len(new)}, only before: {len(gone)})",
             f"- nodes over the testcases both sides export: main graphs {totals['main'][0]} -> {totals['main'][1]}, "
             f"every graph and function body {totals['total'][0]} -> {totals['total'][1]}",
             f"- identical: {same}; fewer: {len(better)} (-{sum(b['total'] - a['total'] for _, b, a in better)} nodes); "
             f"more, other ops or changed outcome: {len(worse)}"]
    for label, rows in (("More nodes, other ops (or a changed outcome)", worse), ("Fewer nodes", better)):
        lines += ["", f"{label}: {len(rows)}", ""]
        lines += [f"- `{key}`: {b} -> {a}" for key, b, a in rows]
    errors = [(key, a) for key, a in new if "error" in a] + [(key, a) for key, a in gone if "error" in a]
    if new or gone:
        lines += ["", f"Only on one side: {len(new)} new, {len(gone)} gone ({len(errors)} of them failed exports)", ""]
        lines += [f"- new `{key}`: {a}" for key, a in new] + [f"- gone `{key}`: {b}" for key, b in gone]
    text = "\n".join(lines)
    print(text)
    if markdown:
        with open(markdown, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 1 if worse else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out")
    parser.add_argument("--select", help="only testcases whose variant id contains this (or one of a,b,c)")
    parser.add_argument("--every", type=int, default=1, help="only every N-th testcase (a quick sample)")
    parser.add_argument("--part", default="0/1", help="I/N: only the I-th of N interleaved shares (run N processes, then --merge)")
    parser.add_argument("--merge", nargs="+", metavar="PART", help="join the parts' files into --out")
    parser.add_argument("--pytest", nargs="+", metavar="TEST", help="run these test files (pytest arguments) and count their exports")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--markdown", help="with --compare: also write the comparison here")
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare, markdown=args.markdown)
    if args.pytest:
        return count_pytest(args.out or "node_counts.json", args.pytest)
    if args.merge:
        merged: dict[str, object] = {}
        for path in args.merge:
            with open(path, encoding="utf-8") as f:
                merged.update(json.load(f))
        with open(args.out or "node_counts.json", "w", encoding="utf-8") as f:
            json.dump(merged, f, indent=1, sort_keys=True)
        return 0
    index, total = (int(n) for n in args.part.split("/"))
    count(args.out or "node_counts.json", args.select, args.every, (index, total))
    return 0


if __name__ == "__main__":
    sys.exit(main())

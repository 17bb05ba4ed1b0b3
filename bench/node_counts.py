"""Node counts of every installed pack's testcases, to show a graph-pass change regresses none.

    python bench/node_counts.py --out before.json            # one export per testcase
    python bench/node_counts.py --out after.json
    python bench/node_counts.py --compare before.json after.json

One variant per testcase: the symbolic float32 one where the testcase has symbols (shape
arithmetic is where duplicates and Identities appear), else the static one. Each entry holds the
main graph's node count and the total over every graph and function body; a failed export is
recorded as its error. Exports only (no onnxruntime, no JAX run): the testcase suite checks the
numbers; this checks the structure across all of them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")


def count(out_path: str, select: str | None, every: int = 1) -> None:
    import warnings

    from jax2onnx import compat
    from jax2onnx.ir.proto_walk import nodes
    from jax2onnx.lower.registry import get_registry
    from jax2onnx.testing import runner

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
            variants = [v for v in runner.variants_of(case, pack, comp.name) if not v.double]
            variant = next((v for v in variants if v.symbolic), variants[0] if variants else None)
            if variant is None or (select and select not in variant.id):
                continue
            key = f"{comp.name}::{variant.id}"
            try:
                with compat.x64_enabled(False):
                    fn = case.build()
                    model = runner._export(variant, fn, runner.variant_inputs(variant, fn))
                results[key] = {"main": len(model.graph.node), "total": sum(1 for _ in nodes(model))}
            except Exception as exc:  # noqa: BLE001 - recorded, compared like a count
                results[key] = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    print(f"{len(results)} testcases in {time.perf_counter() - start:.0f} s -> {out_path}")


def compare(before_path: str, after_path: str) -> int:
    with open(before_path, encoding="utf-8") as f:
        before = json.load(f)
    with open(after_path, encoding="utf-8") as f:
        after = json.load(f)
    worse, better, same = [], [], 0
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key, {}), after.get(key, {})
        if "total" in b and "total" in a:
            if (a["main"], a["total"]) == (b["main"], b["total"]):
                same += 1
            elif a["total"] > b["total"] or a["main"] > b["main"]:
                worse.append((key, b, a))
            else:
                better.append((key, b, a))
        elif b != a:
            worse.append((key, b, a))
    for label, rows in (("MORE NODES (or changed outcome)", worse), ("fewer nodes", better)):
        print(f"{label}: {len(rows)}")
        for key, b, a in rows:
            print(f"  {key}: {b} -> {a}")
    drop = sum(b["total"] - a["total"] for _, b, a in better)
    print(f"identical: {same}; fewer: {len(better)} (-{drop} nodes); more or changed: {len(worse)}")
    return 1 if worse else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out")
    parser.add_argument("--select", help="only testcases whose variant id contains this")
    parser.add_argument("--every", type=int, default=1, help="only every N-th testcase (a quick sample)")
    parser.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    count(args.out or "node_counts.json", args.select, args.every)
    return 0


if __name__ == "__main__":
    sys.exit(main())

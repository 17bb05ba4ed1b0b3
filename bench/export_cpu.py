"""CPU seconds our own export stages take on the lax testcases, per stage, and a hash of every
exported model: run on two revisions to see a speed-up and that no graph changed.

    python bench/export_cpu.py "jax.random.samplers,rng_bit" --out after.json
    python bench/export_cpu.py linalg --limit 40
    python bench/export_cpu.py "MLP,CNN,Transformer" --packs jax2onnx-examples

Each selected variant is exported at opsets default, 17 and 13 as the testcase suite does
(``--jax2onnx-opset=default,17,13``: one trace, then lower, optimize and write per opset); no
onnxruntime and no JAX run. CPU time (``time.process_time``), not wall: the figure holds on a
loaded machine.
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import hashlib
import json
import time

from jax2onnx.compat import x64_enabled
from jax2onnx.testing.pytest_plugin import collect_variants
from jax2onnx.testing.runner import _program, variant_inputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("select", help="comma-separated substrings of 'component::variant id'")
    parser.add_argument("--limit", type=int, default=None, help="only the first N selected variants")
    parser.add_argument("--packs", default="jax2onnx-lax",
                        help="comma-separated packs whose testcases are selected from (default: jax2onnx-lax)")
    parser.add_argument("--out", default=None, help="write {variant id at opset: sha256 of the model} here")
    args = parser.parse_args()
    wanted = args.select.split(",")
    work = [v for v in collect_variants(args.packs.split(","), (None, 17, 13))
            if not v.case.skip_reason and any(w in f"{v.component}::{v.id}" for w in wanted)][: args.limit]
    seconds: collections.Counter[str] = collections.Counter()
    hashes: dict[str, str] = {}
    for v in work:
        first = dataclasses.replace(v, more_opsets=())
        with x64_enabled(v.double):
            fn = v.case.build()
            inputs = variant_inputs(first, fn)
            traced = _program(first, fn, inputs)
            start = time.process_time()
            traced.trace()
            seconds["trace"] += time.process_time() - start
            for at in [first, *(dataclasses.replace(v, opset=o, more_opsets=()) for o in v.more_opsets)]:
                if at.expects_unavailable:
                    continue
                program = _program(at, fn, inputs, traced)
                for stage in ("lower", "optimize", "write"):
                    start = time.process_time()
                    getattr(program, stage)()
                    seconds[stage] += time.process_time() - start
                hashes[f"{v.component}::{at.id}"] = hashlib.sha256(program.model_proto.SerializeToString()).hexdigest()
    ours = seconds["lower"] + seconds["optimize"] + seconds["write"]
    print(f"{len(work)} variants, {len(hashes)} exports; CPU s: "
          + ", ".join(f"{k} {s:.1f}" for k, s in seconds.items()) + f"; lower+optimize+write {ours:.1f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(hashes, f, indent=0, sort_keys=True)


if __name__ == "__main__":
    main()

"""int4 decode speed by MatMulNBits accuracy level: onnxruntime-genai greedy decode tokens/s of the
examples pack's NNX Llama exported with ``export_causal_lm(..., target="onnxruntime")`` as float32,
int4 at ``accuracy_level=1`` (float32 compute), int4 at ``"auto"`` (the default: level 4 per layer
where jax2onnx.precision.accuracy_levels' check allows it) and int4 at 4 everywhere, at 1 and 4
threads.

    python bench/int4_levels.py                  # GPT-2-small size (125 M params, 32 k vocab); a quiet host
    python bench/int4_levels.py --size smoke     # tiny model: checks the script runs (seconds)

Each thread count runs in a fresh process pinned to that many cores. Per variant: the export
(once), then batch 1, a random prompt of ``--prompt`` tokens, ``--new-tokens`` greedy tokens;
genai's ``append_tokens`` (prefill) is not timed, the ``generate_next_token`` loop is; median of
``--runs`` after a warm-up, the variants interleaved run by run. Also per variant: how many
MatMulNBits the export set to level 4, and whether its greedy tokens equal int4 level 1's (random
weights: near-tied logits, so level 4 may move them; "auto" must not on the probe's evidence).
Writes bench/results/int4_levels.json and prints a table. Not a test: nothing here asserts timings.

On these random weights (near-tied logits) the head check of "auto" keeps most or all layers at
level 1, and level 4 everywhere changes the greedy tokens: a run on a shared 2-core machine
(`--threads 1 --runs 1 --prompt 16 --new-tokens 16`, load ~5) gave at 125 M params float32 19.5,
int4 level 1 19.3, auto 19.7 (0 of 85 layers at 4: 10 of the 12 down projections measured
0.0101-0.0104 against the 0.01 bound, the head check kept the rest), level 4 74.7 tok/s (other
tokens); auto's export took 30 s against level 1's 13 s (82 s vs 11 s at load ~10). Auto's speed on a trained model with calibration
texts of its domain is what to measure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from llm_bench import LLAMA_SIZES  # noqa: E402  (the sizes bench/llm_bench.py times)

VARIANTS = ("float32", "int4 level 1", "int4 auto", "int4 level 4")


def precision_of(variant: str) -> Any:
    from jax2onnx import Precision

    return {"float32": "float32", "int4 level 1": Precision("int4", accuracy_level=1),
            "int4 auto": Precision("int4", accuracy_level="auto"),
            "int4 level 4": Precision("int4", accuracy_level=4)}[variant]


def export_all(args: argparse.Namespace) -> dict[str, Any]:
    """Export every variant into the work folder (once, shared by the thread counts)."""
    import onnx
    from flax import nnx
    from jax2onnx_examples.llama import Llama, LlamaConfig
    from jax2onnx_llm import export_causal_lm

    model = Llama(LlamaConfig(**LLAMA_SIZES[args.size]), rngs=nnx.Rngs(0), init_scale=0.05)
    info = {}
    for variant in VARIANTS:
        folder = os.path.join(args.workdir, variant.replace(" ", "-"))
        t0 = time.perf_counter()
        export_causal_lm(model, folder, max_length=args.prompt + args.new_tokens, target="onnxruntime",
                         precision=precision_of(variant))
        proto = onnx.load(os.path.join(folder, "model.onnx"), load_external_data=False)
        levels = [next((a.i for a in n.attribute if a.name == "accuracy_level"), None)
                  for n in proto.graph.node if n.op_type == "MatMulNBits"]
        detail = {p.key: p.value for p in proto.metadata_props}.get("jax2onnx.precision.detail", "float32")
        info[variant] = {"folder": folder, "export_s": round(time.perf_counter() - t0, 1), "matmulnbits": len(levels),
                         "level4": levels.count(4), "detail": detail.split("accuracy_level auto on ")[-1][:400]}
    return info


def worker(args: argparse.Namespace) -> dict[str, Any]:
    cpus = sorted(os.sched_getaffinity(0))[: args.threads]
    os.sched_setaffinity(0, cpus)
    import numpy as np
    import onnxruntime_genai as og

    info = json.load(open(os.path.join(args.workdir, "exports.json")))
    vocab = LLAMA_SIZES[args.size]["vocab_size"]
    prompt = np.random.default_rng(0).integers(3, vocab, size=(1, args.prompt)).astype(np.int32)
    models = {}
    for variant in VARIANTS:
        config_path = os.path.join(info[variant]["folder"], "genai_config.json")
        config = json.load(open(config_path))
        options = config["model"]["decoder"]["session_options"]
        options["intra_op_num_threads"], options["inter_op_num_threads"] = args.threads, 1
        json.dump(config, open(config_path, "w"), indent=4)
        models[variant] = og.Model(info[variant]["folder"])

    def decode(variant: str) -> tuple[float, float, list[int]]:
        params = og.GeneratorParams(models[variant])
        params.set_search_options(do_sample=False, max_length=args.prompt + args.new_tokens, batch_size=1)
        gen = og.Generator(models[variant], params)
        gen.append_tokens(prompt)
        wall, cpu = time.perf_counter(), time.process_time()
        while not gen.is_done():
            gen.generate_next_token()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        return wall, cpu, [int(t) for t in np.asarray(gen.get_sequence(0))[args.prompt:]]

    times: dict[str, list[tuple[float, float]]] = {v: [] for v in VARIANTS}
    tokens: dict[str, list[int]] = {}
    for variant in VARIANTS:
        decode(variant)  # warm-up
    for r in range(args.runs):  # interleaved, the order rotating, so load changes hit every variant
        for variant in VARIANTS[r % len(VARIANTS):] + VARIANTS[: r % len(VARIANTS)]:
            wall, cpu, tokens[variant] = decode(variant)
            times[variant].append((wall, cpu))
    rows = []
    for variant in VARIANTS:
        n = len(tokens[variant]) - 1  # the first new token comes from append_tokens
        wall = statistics.median(t[0] for t in times[variant])
        cpu = statistics.median(t[1] for t in times[variant])
        rows.append({"variant": variant, "threads": args.threads, "decode_tok_s": round(n / wall, 1),
                     "decode_cpu_tok_s": round(n / cpu, 1) if cpu > 0 else None,
                     "same_tokens_as_level_1": tokens[variant] == tokens["int4 level 1"],
                     "load_avg": round(os.getloadavg()[0], 2), **{k: info[variant][k] for k in
                                                                  ("export_s", "matmulnbits", "level4", "detail")}})
    return {"rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="gpt2-small", choices=sorted(LLAMA_SIZES))
    ap.add_argument("--threads", default="1,4")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", default=os.path.join(HERE, "results", "int4_levels.json"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        args.threads = int(args.threads)
        print(json.dumps(worker(args)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as work:
        args.workdir = work
        with open(os.path.join(work, "exports.json"), "w") as f:
            json.dump(export_all(args), f)
        for threads in [int(t) for t in args.threads.split(",")]:
            env = dict(os.environ, OMP_NUM_THREADS=str(threads))
            cmd = [sys.executable, __file__, "--worker", "--threads", str(threads), "--workdir", work, "--size", args.size,
                   "--prompt", str(args.prompt), "--new-tokens", str(args.new_tokens), "--runs", str(args.runs)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if out.returncode:
                print(out.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"worker for {threads} thread(s) failed")
            rows += json.loads(out.stdout.strip().splitlines()[-1])["rows"]
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"size": args.size, "cpu_count": os.cpu_count(), "rows": rows}, f, indent=2)
    head = ["variant", "threads", "decode_tok_s", "decode_cpu_tok_s", "level4", "matmulnbits", "same_tokens_as_level_1",
            "load_avg"]
    print(" | ".join(head))
    for r in rows:
        print(" | ".join(str(r[h]) for h in head))
    for r in rows:
        if r["variant"] == "int4 auto" and r["threads"] == rows[0]["threads"]:
            print("int4 auto:", r["detail"])


if __name__ == "__main__":
    main()

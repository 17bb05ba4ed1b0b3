"""Our exports per ``target=`` against JAX-jit: nodes, rewrites, latency at 1 and 2 threads.

    python bench/targets.py [--models transformer_x4,hf_bert_2l] [--targets generic,onnxruntime]
                            [--threads 1,2] [--batch 8] [--budget 10] [--out-dir bench/results]

For each model (bench/models.py, with bench/hf_models.py's Hugging Face models when transformers is
installed): one export per target in this process (node count of the main graph, the rewrites
applied per rule); then, per thread count, ``latency_worker.py`` in a fresh process pinned to that
many cores runs every target's file in onnxruntime and the function in JAX-jit, interleaved, and
reports median wall and CPU time; above one thread, the onnxruntime target's file once more with
``session.intra_op.allow_spinning=0`` (row ``onnxruntime_nospin``: the session option the
onnxruntime target recommends on a shared machine; a graph cannot set it). Writes OUT_DIR/targets.md and targets.json; asserts nothing
(``nox -s bench_targets``). The ratio column is onnxruntime / JAX-jit (below 1: onnxruntime faster).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402

LATENCY_WORKER = os.path.join(HERE, "latency_worker.py")
MARKER = "BENCH_RESULT "
# the models: the 4-layer NNX stack at d=64 and at d=256 (batch 8 x 64 tokens), the HF Flax
# models (2 layers), then ViT-tiny, GPT-2 small, a BERT-base-sized encoder and the 300 M Linear stack
DEFAULT_MODELS = ("transformer_x4,transformer_x4_d256,hf_vit_2l,hf_bert_2l,hf_gpt2_2l,"
                  "vit_tiny,gpt2_small,bert_base_encoder,linear_300m")


def convert(name: str, target: str, folder: str) -> dict:
    from jax2onnx import to_onnx
    from jax2onnx.passes.rewrite import rewrites_applied

    spec = models.MODELS[name]
    path = os.path.join(folder, f"{name}.{target}.onnx")
    try:
        with models.x64(spec.double):
            proto = to_onnx(spec.build(), spec.specs(), model_name=name, enable_double_precision=spec.double,
                            target=target, output_path=path)
    except Exception as exc:  # noqa: BLE001 - a failed export is a result of the bench
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
    contrib = sorted({n.op_type for n in proto.graph.node if n.domain == "com.microsoft"})
    return {"ok": True, "path": path, "nodes": len(proto.graph.node), "rewrites": rewrites_applied(proto),
            "contrib_ops": contrib}


def latency(name: str, paths: dict, threads: int, args: argparse.Namespace) -> dict:
    spec = models.MODELS[name]
    batch = spec.batch or args.batch
    min_runs = 5 if spec.big else 10
    cmd = [sys.executable, LATENCY_WORKER, name, str(threads), str(batch), str(args.budget), str(min_runs), str(args.runs),
           *(f"{t}={p}" for t, p in paths.items())]
    load = os.getloadavg()[0]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "threads": threads, "error": f"latency worker timed out after {args.timeout:.0f} s"}
    lines = [line for line in out.stdout.splitlines() if line.startswith(MARKER)]
    if not lines:
        return {"ok": False, "error": (out.stderr or out.stdout)[-300:]}
    result = json.loads(lines[-1][len(MARKER):])
    result["load"] = f"{load:.1f} -> {os.getloadavg()[0]:.1f}"  # 1-minute load average before -> after
    return result


def render(results: dict) -> str:
    meta = results["meta"]
    lines = [f"# Targets: onnxruntime against JAX-jit ({meta['date']}, {meta['machine']})", "",
             "Median of interleaved runs, each thread count in a fresh process pinned to that many cores. "
             "ratio = onnxruntime / JAX-jit (wall; CPU). load: the machine's 1-minute load average before -> "
             f"after each run, on {meta.get('cpus', '?')} CPUs. Where the time goes, what was tried and the "
             "recommended session options: targets_analysis.md (by hand).", "",
             "| model | target | nodes | com.microsoft ops | rewrites | threads | batch | wall µs (ort / JAX) | "
             "CPU µs (ort / JAX) | ratio wall | ratio CPU | load |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, entry in results["models"].items():
        targets = dict(entry["targets"])
        if "onnxruntime" in targets:  # rows only where a run measured it (more than one thread)
            targets["onnxruntime_nospin"] = targets["onnxruntime"]
        for target, conv in targets.items():
            if not conv.get("ok"):
                lines.append(f"| {name} | {target} | failed: {conv.get('error', '').replace('|', '/')} | | | | | | | | | |")
                continue
            rewrites = ", ".join(f"{k} {v}" for k, v in conv["rewrites"].items()) or "none"
            for run in entry["latency"]:
                lat = run.get("latency", {})
                ours, jax = lat.get(target), lat.get("jax")
                if target.endswith("_nospin") and run.get("ok") and ours is None:
                    continue
                if not run.get("ok") or ours is None or jax is None:
                    lines.append(f"| {name} | {target} | {conv['nodes']} | {', '.join(conv['contrib_ops'])} | {rewrites} "
                                 f"| {run.get('threads', '?')} | | latency failed: {run.get('error', '')[:120]} | | | | |")
                    continue
                lines.append(
                    f"| {name} | {target} | {conv['nodes']} | {', '.join(conv['contrib_ops'])} | {rewrites} | "
                    f"{run['threads']} | {run['batch']} | {ours['median_us']:.0f} / {jax['median_us']:.0f} | "
                    f"{ours['cpu_median_us']:.0f} / {jax['cpu_median_us']:.0f} | "
                    f"{ours['median_us'] / jax['median_us']:.2f} | {ours['cpu_median_us'] / jax['cpu_median_us']:.2f} | "
                    f"{run.get('load', '')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=DEFAULT_MODELS)
    p.add_argument("--targets", default="generic,onnxruntime")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--budget", type=float, default=10.0, help="seconds of latency runs per model and thread count")
    p.add_argument("--runs", type=int, default=2000, help="max interleaved rounds")
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    args = p.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in models.MODELS]
    if unknown:
        p.error(f"unknown model(s) {unknown}; known: {sorted(models.MODELS)}")
    targets = [t for t in args.targets.split(",") if t]
    results: dict = {"meta": {"date": datetime.date.today().isoformat(), "machine": platform.processor() or platform.machine(),
                              "cpus": os.cpu_count(), "args": vars(args)}, "models": {}}
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            convs = {t: convert(name, t, folder) for t in targets}
            paths = {t: c["path"] for t, c in convs.items() if c.get("ok")}
            runs = []
            for th in (int(t) for t in args.threads.split(",")) if paths else ():
                sides = dict(paths)
                if th > 1 and "onnxruntime" in paths:  # the recommended session option, as a diagnostic row
                    sides["onnxruntime_nospin"] = paths["onnxruntime"]
                runs.append(latency(name, sides, th, args))
            results["models"][name] = {"targets": {t: {k: v for k, v in c.items() if k != "path"} for t, c in convs.items()},
                                       "latency": runs}
            print(render({"meta": results["meta"], "models": {name: results["models"][name]}}).splitlines()[-1], flush=True)
    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "targets.json"), "w") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(args.out_dir, "targets.md"), "w") as f:
        f.write(render(results))
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Where one decode step of exported LLM folders spends its time: onnxruntime's per-op profile.

    python bench/llm_step_profile.py FOLDER [FOLDER ...] [--past 0.75] [--runs 150] [--threads 1]

A diagnostic beside bench/llm_bench.py (whose ``--profile`` sums a whole generation by op type):
one new token after ``--past`` cached ones (a fraction of the folder's ``max_length``, or a count),
batch 1, in a session as onnxruntime-genai makes it (``intra_op_num_threads``; with the shared
buffer, past and present bound to one buffer, so ``GroupQueryAttention`` writes in place where the
graph lets it). Per folder, from the medians of each node's kernel time over ``--runs`` steps:

- the share of each op type;
- the padding marker's cost (``export.flat_step``): the nodes that read layer 0's past keys whole
  (not the per-slot flags' Slice/Gather/Shape), the node writing ``present.0.key`` when it is not
  the attention, and layer 0's attention's time over the other layers' median (the copy it makes
  when it cannot write in place);
- the bandwidth each weight ``MatMul`` reads its weight at (bytes / median time), the LM head
  (the graph's ``logits``) and the median of the rest.

Run each folder in its own process pinned to ``--threads`` cores (``--worker``), one after the
other. Not a test: nothing here asserts timings.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys


def profile(folder: str, past_arg: float, runs: int, threads: int) -> dict:
    import numpy as np
    import onnx
    import onnxruntime as ort

    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])
    config = json.load(open(os.path.join(folder, "genai_config.json")))
    dec, search = config["model"]["decoder"], config["search"]
    shared, length = search["past_present_share_buffer"], search["max_length"]
    past = int(past_arg * length) if past_arg < 1 else int(past_arg)
    path = os.path.join(folder, dec["filename"])
    graph = onnx.load(path, load_external_data=False).graph
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
    options.enable_profiling = True
    options.profile_file_prefix = os.path.join("/tmp", f"step-profile-{os.getpid()}")
    session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    layers, heads, head_size = dec["num_hidden_layers"], dec["num_key_value_heads"], dec["head_size"]
    rng = np.random.default_rng(0)
    binding = session.io_binding()
    ids_type = np.int64 if session.get_inputs()[0].type == "tensor(int64)" else np.int32
    binding.bind_cpu_input("input_ids", np.array([[5]], ids_type))
    binding.bind_cpu_input("attention_mask", np.ones((1, past + 1), np.int32))
    for i in range(layers):
        for kind in ("key", "value"):
            cache = rng.standard_normal((1, heads, length if shared else past, head_size)).astype(np.float32)
            value = ort.OrtValue.ortvalue_from_numpy(cache)
            binding.bind_ortvalue_input(f"past_key_values.{i}.{kind}", value)
            if shared:
                binding.bind_ortvalue_output(f"present.{i}.{kind}", value)
            else:
                binding.bind_output(f"present.{i}.{kind}")
    binding.bind_output("logits")
    for _ in range(runs):
        session.run_with_iobinding(binding)
    times, ops = collections.defaultdict(list), {}
    for event in json.load(open(session.end_profiling())):
        if event.get("cat") == "Node" and event["name"].endswith("_kernel_time"):
            name = event["name"][: -len("_kernel_time")]
            times[name].append(event["dur"])
            ops[name] = event["args"]["op_name"]
    median = {name: statistics.median(t) for name, t in times.items()}
    total = sum(median.values())
    by_op = collections.Counter()
    for name, t in median.items():
        by_op[ops[name]] += t
    # the marker's nodes, by the graph's names (onnxruntime keeps the names of the nodes it runs)
    whole = {n.name for n in graph.node if "past_key_values.0.key" in n.input and n.op_type not in ("Slice", "Gather", "Shape")}
    whole |= {n.name for n in graph.node if "present.0.key" in n.output and n.op_type != "GroupQueryAttention"}
    attention = sorted((n.name for n in graph.node if n.op_type == "GroupQueryAttention"),
                       key=lambda name: [i for i, n in enumerate(graph.node) if n.name == name][0])
    marker = {name: median[name] for name in whole if name in median}
    if len(attention) > 1 and all(a in median for a in attention):
        marker["layer 0 attention over the others' median"] = median[attention[0]] - statistics.median(
            median[a] for a in attention[1:])
    sizes = {i.name: int(np.prod(i.dims)) * 4 for i in graph.initializer if len(i.dims) == 2}
    rates = {n.name: sizes[n.input[1]] / median[n.name] / 1e3 for n in graph.node
             if n.op_type == "MatMul" and n.input[1] in sizes and n.name in median}
    head = next((n.name for n in graph.node if "logits" in n.output and n.name in rates), None)
    return {
        "folder": folder, "max_length": length, "past": past, "threads": threads, "runs": runs,
        "load_avg": os.getloadavg()[0], "kernel_us": round(total),
        "share": {op: round(100 * t / total, 2) for op, t in by_op.most_common(12)},
        "marker_us": {k: round(v, 1) for k, v in marker.items()},
        "marker_share": round(100 * sum(marker.values()) / total, 2),
        "matmul_gb_s": {"lm_head": round(rates[head], 1) if head else None,
                        "others_median": round(statistics.median(v for k, v in rates.items() if k != head), 1)
                        if len(rates) > 1 else None},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folders", nargs="+")
    ap.add_argument("--past", type=float, default=0.75, help="cached tokens: a fraction of max_length, or a count")
    ap.add_argument("--runs", type=int, default=150)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(profile(args.folders[0], args.past, args.runs, args.threads)))
        return
    for folder in args.folders:
        cmd = [sys.executable, __file__, "--worker", folder, "--past", str(args.past), "--runs", str(args.runs),
               "--threads", str(args.threads)]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode:
            print(out.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"profiling {folder} failed")
        print(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()

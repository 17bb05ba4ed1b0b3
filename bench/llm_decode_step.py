"""One decode step of an exported LLM folder in plain onnxruntime: threads and thread-pool spinning.

    python bench/llm_decode_step.py FOLDER [--threads 1,2] [--past 32] [--runs 30]

A diagnostic beside bench/llm_bench.py: onnxruntime-genai 0.18's ``session_options`` set the
intra-op thread count but pass no onnxruntime config entries, so whether the intra-op pool's
spin-waiting (``session.intra_op.allow_spinning``) is what a multi-threaded decode loses on a loaded
machine is measured here, on the same graph, with a session onnxruntime-genai would create (the
folder's model, batch 1, one new token after ``--past`` cached ones). Each (threads, spinning) runs
in a fresh process pinned to that many cores; per step: median wall-clock and process CPU ms.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

STEP = r"""
import json, os, statistics, sys, time
import numpy as np
import onnxruntime as ort

folder, threads, spin, past, runs = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])
config = json.load(open(os.path.join(folder, "genai_config.json")))
dec = config["model"]["decoder"]
shared = config["search"]["past_present_share_buffer"]
options = ort.SessionOptions()
options.intra_op_num_threads = threads
options.inter_op_num_threads = 1
options.add_session_config_entry("session.intra_op.allow_spinning", spin)
session = ort.InferenceSession(os.path.join(folder, dec["filename"]), options, providers=["CPUExecutionProvider"])
kv_len = config["search"]["max_length"] if shared else past
kv = np.zeros((1, dec["num_key_value_heads"], kv_len, dec["head_size"]), np.float32)
feeds = {"input_ids": np.array([[5]], np.int64 if session.get_inputs()[0].type == "tensor(int64)" else np.int32),
         "attention_mask": np.ones((1, past + 1), np.int32)}
for i in range(dec["num_hidden_layers"]):
    feeds[f"past_key_values.{i}.key"] = kv
    feeds[f"past_key_values.{i}.value"] = kv
for _ in range(3):
    session.run(None, feeds)
wall, cpu = [], []
for _ in range(runs):
    t, c = time.perf_counter(), time.process_time()
    session.run(None, feeds)
    wall.append(time.perf_counter() - t)
    cpu.append(time.process_time() - c)
print(json.dumps({"threads": threads, "allow_spinning": spin, "wall_ms": statistics.median(wall) * 1e3,
                  "cpu_ms": statistics.median(cpu) * 1e3, "load_avg": os.getloadavg()[0]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--past", type=int, default=32)
    ap.add_argument("--runs", type=int, default=30)
    args = ap.parse_args()
    rows = []
    for threads in [int(t) for t in args.threads.split(",")]:
        for spin in ("1", "0"):
            out = subprocess.run([sys.executable, "-c", STEP, args.folder, str(threads), spin, str(args.past),
                                  str(args.runs)], capture_output=True, text=True, check=False)
            if out.returncode:
                raise SystemExit(out.stderr[-2000:])
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()

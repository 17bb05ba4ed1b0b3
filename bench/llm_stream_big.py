"""A ~1.1 B-parameter Llama-style decoder exported streamed from a safetensors file, then run in
onnxruntime-genai.

    python bench/llm_stream_big.py                    # TinyLlama-1.1B's sizes, random weights (~4.4 GB)
    python bench/llm_stream_big.py --size smoke       # a tiny one: checks the script runs (seconds)
    python bench/llm_stream_big.py --workdir /tmp/x --keep

1. writes random weights for the examples pack's NNX Llama at the chosen size to
   ``<workdir>/weights.safetensors``, one tensor at a time, under the names
   ``jax2onnx_llm.weights.weight_names`` gives (the model itself is never built: ``nnx.eval_shape``);
2. in a fresh process, ``export_causal_lm(abstract_model, out, max_length=..., cache="shared",
   weights=<file>)`` and that process's peak RSS: over the whole process (imports included) and the
   increase during the export (``VmHWM`` restarted before it); target: peak <= largest tensor + 1 GB;
3. in another process, onnxruntime-genai loads the folder and greedily generates ``--new-tokens``
   tokens after a short prompt (load time, decode tokens/s, the tokens).

Writes bench/results/llm_stream_big.json and prints it. Not a test: nothing here asserts. Disk:
twice the weights (the source and model.onnx.data); removed afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {
    # TinyLlama-1.1B's shape: 22 layers, hidden 2048, 32 query / 4 KV heads, SwiGLU 5632, vocab 32000.
    "1b": dict(hidden_size=2048, intermediate_size=5632, num_layers=22, num_heads=32, num_kv_heads=4,
               vocab_size=32000, max_positions=2048),
    "smoke": dict(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                  vocab_size=256, max_positions=256),
}

COMMON = r"""
import json, sys
from flax import nnx
from jax2onnx_examples.llama import Llama, LlamaConfig

def abstract_model(size):
    cfg = LlamaConfig(**json.loads(size), eos_token_id=2)
    return cfg, nnx.eval_shape(lambda: Llama(cfg, rngs=nnx.Rngs(0)))  # shapes only, nothing allocated
"""

WRITE = COMMON + r"""
import numpy as np
from jax2onnx_llm.weights import weight_names, write_safetensors

cfg, model = abstract_model(sys.argv[1])
names = weight_names(model)

def make(name, shape, seed):
    def values():
        rng = np.random.default_rng(seed)
        if name.endswith("scale.value"):  # RMSNorm scales
            return np.ones(shape, np.float32)
        std = 1.0 if name.startswith("embed.") else 0.02
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
    return values

write_safetensors(sys.argv[2], [(n, s.shape, np.float32, make(n, s.shape, i)) for i, (n, s) in enumerate(names.items())])
largest = max(int(np.prod(s.shape)) * 4 for s in names.values())
print(json.dumps({"params": sum(int(np.prod(s.shape)) for s in names.values()), "largest_tensor_mib": largest / 2**20,
                  "tensors": len(names)}))
"""

EXPORT = COMMON + r"""
import time

def status(key):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) / 1024 for line in f if line.startswith(key))  # MiB

from jax2onnx_llm import export_causal_lm
import jax2onnx_lax, jax2onnx_nnx  # the packs load here, before the export's peak is measured

cfg, model = abstract_model(sys.argv[1])
rss_before, peak_before = status("VmRSS"), status("VmHWM")
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # restart VmHWM: the peak below is the export's
t, c = time.perf_counter(), time.process_time()
export_causal_lm(model, sys.argv[3], max_length=int(sys.argv[4]), cache="shared", weights=sys.argv[2])
print(json.dumps({"export_s": time.perf_counter() - t, "export_cpu_s": time.process_time() - c,
                  "rss_before_export_mib": rss_before, "peak_rss_export_mib": status("VmHWM"),
                  "peak_rss_increase_mib": status("VmHWM") - rss_before,
                  "peak_rss_process_mib": max(peak_before, status("VmHWM"))}))
"""

GENERATE = r"""
import json, sys, time
import numpy as np
import onnxruntime_genai as og

folder, n, vocab = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
t = time.perf_counter()
model = og.Model(folder)
load_s = time.perf_counter() - t
prompt = np.array([[1, 15, 27, 300, 4000, 77, 9]], dtype=np.int32) % vocab
params = og.GeneratorParams(model)
params.set_search_options(do_sample=False, max_length=prompt.shape[1] + n, batch_size=1)
gen = og.Generator(model, params)
t = time.perf_counter()
gen.append_tokens(prompt)
prefill_s = time.perf_counter() - t
t = time.perf_counter()
while not gen.is_done():
    gen.generate_next_token()
decode_s = time.perf_counter() - t
tokens = [int(x) for x in np.asarray(gen.get_sequence(0))[prompt.shape[1]:]]
import resource
print(json.dumps({"genai_load_s": load_s, "genai_prefill_s": prefill_s,
                  "genai_decode_tok_s": (len(tokens) - 1) / max(decode_s, 1e-9), "tokens": tokens,
                  "genai_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(code: str, *args: str) -> dict:
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False,
                          env=dict(os.environ, JAX_PLATFORMS="cpu"))
    if proc.returncode:
        return {"error": proc.stderr[-3000:], "process_s": time.perf_counter() - t}
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - t
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1b", choices=sorted(SIZES))
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=8)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "llm_stream_big.json"))
    args = ap.parse_args()
    work = args.workdir or tempfile.mkdtemp(prefix="jax2onnx-llm-stream-")
    os.makedirs(work, exist_ok=True)
    source, folder = os.path.join(work, "weights.safetensors"), os.path.join(work, "model")
    size = json.dumps(SIZES[args.size])
    result: dict = {"size": args.size, "config": SIZES[args.size], "max_length": args.max_length,
                    "load_before": os.getloadavg()}
    try:
        result["write"] = child(WRITE, size, source)
        if "error" not in result["write"]:
            result["source_gb"] = os.path.getsize(source) / 1e9
            result["export"] = child(EXPORT, size, source, folder, str(args.max_length))
        if "error" not in result.get("export", {"error": 1}):
            result["folder_gb"] = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)) / 1e9
            result["target_peak_mib"] = result["write"]["largest_tensor_mib"] + 1024
            result["generate"] = child(GENERATE, folder, str(args.new_tokens), str(SIZES[args.size]["vocab_size"]))
        result["load_after"] = os.getloadavg()
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

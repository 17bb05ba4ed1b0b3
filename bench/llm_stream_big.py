"""A Llama-style decoder exported streamed from a safetensors file, then run in onnxruntime-genai.

    python bench/llm_stream_big.py                               # TinyLlama-1.1B's sizes (~4.4 GB source)
    python bench/llm_stream_big.py --size 250m                   # a ~250 M one (~1 GB)
    python bench/llm_stream_big.py --size 7b --precision int4    # Llama-2-7B's sizes, bfloat16 source (~13.5 GB)
    python bench/llm_stream_big.py --size smoke --precision int4 # a tiny one: checks the script runs
    python bench/llm_stream_big.py --size 250m --inline          # external_data=False: what streaming avoids
    python bench/llm_stream_big.py --workdir /tmp/x --keep

1. writes random weights for the examples pack's NNX Llama at the chosen size to
   ``<workdir>/weights.safetensors``, one tensor at a time, under the names
   ``jax2onnx_llm.weights.weight_names`` gives (the model itself is never built: ``nnx.eval_shape``),
   in float32 or bfloat16 (``--source-dtype``; bfloat16 by default at 7 B: half the disk), a bfloat16
   tensor widened to the model's float32 when the export reads it;
2. in a fresh process, ``export_causal_lm(abstract_model, out, max_length=..., cache="shared",
   precision=..., weights=<file>, progress=True)`` and that process's peak RSS (``peak_rss.py``: over
   the whole process, imports included, and the increase during the export); targets: peak <= largest
   tensor + 1 GiB (issue #32), and <= 2.5 GiB for 7 B in int4 (issue #35); the export's progress
   lines are echoed to this script's stderr;
3. in another process, onnxruntime-genai loads the folder and greedily generates ``--new-tokens``
   tokens after a short prompt (load time, decode tokens/s, the tokens).

Writes bench/results/llm_stream_big-<size>-<precision>.json, rebuilds bench/results/llm_stream_big.md
from every such file, and prints the result. Not a test: nothing here asserts. Disk: the source and
the folder, removed afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {
    # Llama-2-7B's shape: 32 layers, hidden 4096, 32 heads (no grouping), SwiGLU 11008, vocab 32000: 6.74 B.
    "7b": dict(hidden_size=4096, intermediate_size=11008, num_layers=32, num_heads=32, num_kv_heads=32,
               vocab_size=32000, max_positions=4096),
    # TinyLlama-1.1B's shape: 22 layers, hidden 2048, 32 query / 4 KV heads, SwiGLU 5632, vocab 32000.
    "1b": dict(hidden_size=2048, intermediate_size=5632, num_layers=22, num_heads=32, num_kv_heads=4,
               vocab_size=32000, max_positions=2048),
    # ~250 M: 16 layers, hidden 1024, 16 query / 4 KV heads, SwiGLU 2816, vocab 32000.
    "250m": dict(hidden_size=1024, intermediate_size=2816, num_layers=16, num_heads=16, num_kv_heads=4,
                 vocab_size=32000, max_positions=2048),
    "smoke": dict(hidden_size=64, intermediate_size=128, num_layers=2, num_heads=4, num_kv_heads=2,
                  vocab_size=256, max_positions=256),
}
#: the source's dtype where --source-dtype is not given: bfloat16 halves the 7 B file (13.5 GB)
SOURCE_DTYPE = {"7b": "bfloat16"}

COMMON = r"""
import json, sys
from flax import nnx
from jax2onnx_examples.llama import Llama, LlamaConfig

def abstract_model(size):
    cfg = LlamaConfig(**json.loads(size), eos_token_id=2)
    return cfg, nnx.eval_shape(lambda: Llama(cfg, rngs=nnx.Rngs(0)))  # shapes only, nothing allocated
"""

WRITE = COMMON + r"""
import ml_dtypes
import numpy as np
from jax2onnx_llm.weights import weight_names, write_safetensors

cfg, model = abstract_model(sys.argv[1])
names = weight_names(model)
dtype = np.dtype(ml_dtypes.bfloat16) if sys.argv[3] == "bfloat16" else np.dtype(np.float32)

def make(name, shape, seed):
    def values():
        rng = np.random.default_rng(seed)
        if name.endswith("scale.value"):  # RMSNorm scales
            return np.ones(shape, np.float32)
        std = 1.0 if name.startswith("embed.") else 0.02
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
    return values

write_safetensors(sys.argv[2], [(n, s.shape, dtype, make(n, s.shape, i)) for i, (n, s) in enumerate(names.items())])
largest = max(int(np.prod(s.shape)) * 4 for s in names.values())  # in float32, as the export holds it
print(json.dumps({"params": sum(int(np.prod(s.shape)) for s in names.values()), "largest_tensor_mib": largest / 2**20,
                  "tensors": len(names), "source_dtype": dtype.name}))
"""

EXPORT = COMMON + r"""
import numpy as np
sys.path.insert(0, sys.argv[6])  # bench/
from peak_rss import measure
from jax2onnx.export.weights import SafetensorsSource, WeightSource
from jax2onnx import Precision
from jax2onnx_llm import export_causal_lm
import jax, jax2onnx_lax, jax2onnx_nnx  # the packs load here, before the export's peak is measured

class Widened(WeightSource):
    # a bfloat16 checkpoint of the float32 model: each tensor widened when it is read
    def __init__(self, inner):
        self.inner = inner
    def load(self, name):
        return np.asarray(self.inner.load(name), dtype=np.float32)
    def catalog(self):
        return {n: jax.ShapeDtypeStruct(s.shape, np.float32) for n, s in self.inner.catalog().items()}
    def describe(self):
        return self.inner.describe() + " (widened to float32)"

cfg, model = abstract_model(sys.argv[1])
source = SafetensorsSource(sys.argv[2])
if any(s.dtype != np.float32 for s in source.catalog().values()):
    source = Widened(source)
external_data = {"auto": None, "inline": False}[sys.argv[7]]
# a precision name, or a JSON object of jax2onnx.Precision's fields (bench/llamacpp_bench.py's variants)
precision = Precision(**json.loads(sys.argv[5])) if sys.argv[5].startswith("{") else sys.argv[5]
print(json.dumps(measure(lambda: export_causal_lm(model, sys.argv[3], max_length=int(sys.argv[4]), cache="shared",
                                                 precision=precision, weights=source, progress=True,
                                                 external_data=external_data))))
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
    """Run ``code`` in a fresh Python: its stderr (the export's progress lines) is echoed as it comes,
    its last stdout line is the JSON result."""
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    tail: deque[str] = deque(maxlen=60)
    assert proc.stdout is not None and proc.stderr is not None
    for line in proc.stderr:  # stdout holds one JSON line: it cannot fill its pipe meanwhile
        sys.stderr.write(line)
        sys.stderr.flush()
        tail.append(line)
    stdout = proc.stdout.read()
    if proc.wait():
        return {"error": "".join(tail)[-3000:], "process_s": time.perf_counter() - t}
    out = json.loads(stdout.strip().splitlines()[-1])
    out["process_s"] = time.perf_counter() - t
    return out


def _row(r: dict) -> str:
    w, e, g = r.get("write", {}), r.get("export", {}), r.get("generate", {})

    def f(x: object, fmt: str = "{:.0f}") -> str:
        return fmt.format(x) if isinstance(x, (int, float)) else "-"

    cells = [r["size"], r["precision"] + (" inline" if r.get("inline") else ""), f(w.get("params", 0) / 1e9, "{:.2f}"), w.get("source_dtype", "float32"),
             f(r.get("source_gb"), "{:.2f}"), f(r.get("folder_gb"), "{:.2f}"), f(w.get("largest_tensor_mib")),
             f(e.get("peak_rss_process_mib")), f(e.get("peak_rss_increase_mib")), f(r.get("target_peak_mib")),
             f(e.get("export_s")), f(e.get("export_cpu_s")), f(g.get("genai_load_s")),
             f(g.get("genai_decode_tok_s"), "{:.2f}"), f(r["load_before"][0], "{:.1f}")]
    return "| " + " | ".join(cells) + " |"


def write_markdown(results: str) -> None:
    """bench/results/llm_stream_big.md: one row per result file."""
    rows = []
    for path in sorted(glob.glob(os.path.join(results, "llm_stream_big-*.json"))):
        with open(path) as fh:
            rows.append(_row(json.load(fh)))
    with open(os.path.join(results, "llm_stream_big.md"), "w") as fh:
        fh.write(
            "# Streamed LLM exports (bench/llm_stream_big.py)\n\n"
            "`export_causal_lm(..., weights=<safetensors>, cache=\"shared\")` of the examples pack's NNX Llama with "
            "random weights, in a fresh process; onnxruntime-genai then loads the folder and generates 8 tokens "
            "greedily. Peak RSS (MiB): the export process's `VmHWM`, over the whole process (imports included) and "
            "the increase during the export. Target: the largest tensor (float32) + 1 GiB, and 2.5 GiB for 7 B "
            "in int4. An `inline` row is `external_data=False` (`--inline`): the weights gathered into one "
            "`model.onnx`, what a streamed export under 1.8 GB did before it wrote `model.onnx.data` at every size. Seconds, wall and CPU, on a 2-core machine shared with other work (load average before "
            "the run in the last column). Re-run: `nox -s bench_llm_stream -- --size 250m` (`1b`, "
            "`--precision int4`); 7 B: `nox -s bench_7b`.\n\n"
            "| size | precision | params (B) | source dtype | source GB | folder GB | largest tensor MiB | peak RSS "
            "| peak increase | target | export s | export CPU s | genai load s | decode tok/s | load avg |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n" + "\n".join(rows) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="1b", choices=sorted(SIZES))
    ap.add_argument("--precision", default="float32", choices=["float32", "int4", "int8", "float16"])
    ap.add_argument("--source-dtype", default=None, choices=["float32", "bfloat16"],
                    help="the safetensors file's dtype (default: bfloat16 at 7b, else float32)")
    ap.add_argument("--inline", action="store_true",
                    help="external_data=False: the weights gathered into one model.onnx (the cost streaming avoids)")
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--new-tokens", type=int, default=8)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--json", default=None, help="default: bench/results/llm_stream_big-<size>-<precision>.json")
    args = ap.parse_args()
    tag = f"{args.size}-{args.precision}" + ("-inline" if args.inline else "")
    args.json = args.json or os.path.join(HERE, "results", f"llm_stream_big-{tag}.json")
    source_dtype = args.source_dtype or SOURCE_DTYPE.get(args.size, "float32")
    work = args.workdir or tempfile.mkdtemp(prefix="jax2onnx-llm-stream-")
    os.makedirs(work, exist_ok=True)
    source, folder = os.path.join(work, "weights.safetensors"), os.path.join(work, "model")
    size = json.dumps(SIZES[args.size])
    result: dict = {"size": args.size, "precision": args.precision, "inline": args.inline, "config": SIZES[args.size],
                    "max_length": args.max_length, "load_before": os.getloadavg()}
    try:
        result["write"] = child(WRITE, size, source, source_dtype)
        if "error" not in result["write"]:
            result["source_gb"] = os.path.getsize(source) / 1e9
            result["export"] = child(EXPORT, size, source, folder, str(args.max_length), args.precision, HERE,
                                     "inline" if args.inline else "auto")
        if "error" not in result.get("export", {"error": 1}):
            result["folder_gb"] = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)) / 1e9
            result["target_peak_mib"] = 2.5 * 1024 if args.size == "7b" else result["write"]["largest_tensor_mib"] + 1024
            result["generate"] = child(GENERATE, folder, str(args.new_tokens), str(SIZES[args.size]["vocab_size"]))
        result["load_after"] = os.getloadavg()
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(result, f, indent=1)
    if os.path.dirname(os.path.abspath(args.json)) == os.path.join(HERE, "results"):
        write_markdown(os.path.join(HERE, "results"))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

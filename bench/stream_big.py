"""Export a model bigger than the converter may hold: abstract weights + a safetensors source.

    python bench/stream_big.py [--gb 8] [--dim 8192] [--workdir DIR] [--keep]

1. writes a synthetic ``--gb`` GB safetensors file (a stack of dim×dim float32 layers, each made
   from its own seed, written one layer at a time);
2. in a fresh process, exports ``x -> tanh(x @ W_i + b_i)`` over all layers with
   ``Weights(abstract, file)`` and ``output_path`` (external data), and reports that process's
   peak RSS (targets: under 2 GB for 8 GB of weights; the increase during ``to_onnx`` at most the
   largest tensor + 256 MB), its wall and CPU time, and how long naming the weights file after its
   content (hashing) took;
3. loads the ONNX model in onnxruntime (prepacking off, so the weights are not copied) and checks the output against JAX computed layer by layer
   (each layer's weights loaded on its own).

Writes bench/results/stream_big.json. Not a test: nothing here asserts; the numbers are reported.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def layer(i: int, dim: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1000 + i)
    w = (rng.standard_normal((dim, dim), dtype=np.float32) / np.float32(np.sqrt(dim))).astype(np.float32)
    b = rng.standard_normal(dim, dtype=np.float32) * np.float32(0.1)
    return w, b


def write_weights(path: str, n_layers: int, dim: int) -> None:
    header, offset = {}, 0
    for i in range(n_layers):
        for name, shape in ((f"layers.{i}.w", [dim, dim]), (f"layers.{i}.b", [dim])):
            size = int(np.prod(shape)) * 4
            header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + size]}
            offset += size
    raw = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for i in range(n_layers):
            w, b = layer(i, dim)
            f.write(w.tobytes())
            f.write(b.tobytes())


EXPORT = r"""
import json, sys, time
import jax, jax.numpy as jnp, numpy as np
from jax2onnx import Weights, to_onnx
from jax2onnx.export import saving

sys.path.insert(0, sys.argv[5])  # bench/
from peak_rss import measure

path, out, n_layers, dim = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
abstract = {"layers": [{"w": jax.ShapeDtypeStruct((dim, dim), jnp.float32), "b": jax.ShapeDtypeStruct((dim,), jnp.float32)}
                       for _ in range(n_layers)]}

def forward(params, x):
    for p in params["layers"]:
        x = jnp.tanh(x @ p["w"] + p["b"])
    return x

digest_s = []
_digest = saving.weights_digest
def timed_digest(*args):  # how much of the export is naming the weights file after its content
    t = time.perf_counter()
    try:
        return _digest(*args)
    finally:
        digest_s.append(time.perf_counter() - t)
saving.weights_digest = timed_digest

figures = measure(lambda: to_onnx(forward, [Weights(abstract, path), ("B", dim)], output_path=out, external_data=True))
print(json.dumps({**figures, "digest_s": sum(digest_s)}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=8.0)
    ap.add_argument("--dim", type=int, default=8192)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    layer_bytes = args.dim * args.dim * 4
    n_layers = max(1, round(args.gb * 1e9 / layer_bytes))
    work = args.workdir or tempfile.mkdtemp(prefix="jax2onnx-stream-")
    os.makedirs(work, exist_ok=True)
    st, onnx_path = os.path.join(work, "weights.safetensors"), os.path.join(work, "model.onnx")
    result: dict[str, object] = {"layers": n_layers, "dim": args.dim, "param_gb": n_layers * (layer_bytes + args.dim * 4) / 1e9,
                                 "largest_tensor_mib": layer_bytes / 2**20,
                                 "target_increase_mib": layer_bytes / 2**20 + 256, "target_process_mib": 2048}
    try:
        t = time.perf_counter()
        write_weights(st, n_layers, args.dim)
        result["write_source_s"] = time.perf_counter() - t
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", EXPORT, st, onnx_path, str(n_layers), str(args.dim), HERE],
                              capture_output=True, text=True, check=False)
        result["export_process_s"] = time.perf_counter() - t
        if proc.returncode != 0:
            result["export_error"] = proc.stderr[-2000:]
        else:
            result.update(json.loads(proc.stdout.strip().splitlines()[-1]))
            result["onnx_bytes"] = sum(os.path.getsize(os.path.join(work, f)) for f in os.listdir(work) if f.startswith("model.onnx"))
            import onnxruntime as ort

            t = time.perf_counter()
            options = ort.SessionOptions()
            # Prepacking would copy every weight into onnxruntime's own layout: 8 GB more on a shared machine.
            options.add_session_config_entry("session.disable_prepacking", "1")
            sess = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
            x = np.random.default_rng(0).standard_normal((2, args.dim)).astype(np.float32)
            got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
            result["ort_load_run_s"] = time.perf_counter() - t
            del sess
            import jax.numpy as jnp

            ref = x
            for i in range(n_layers):  # JAX, one layer's weights in memory at a time
                w, b = layer(i, args.dim)
                ref = np.asarray(jnp.tanh(jnp.asarray(ref) @ w + b))
            result["max_abs_diff_vs_jax"] = float(np.max(np.abs(got - ref)))
            result["max_abs_ref"] = float(np.max(np.abs(ref)))
            import resource

            result["checking_process_peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "stream_big.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

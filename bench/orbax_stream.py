"""Export from an Orbax checkpoint of >= 1 B parameters, read array by array: the exporter's peak RSS.

    python bench/orbax_stream.py [--params 1.07e9] [--dim 4096] [--workdir DIR] [--keep] [--run-ort]

1. in a fresh process, saves a checkpoint of ``--params`` random float32 parameters (a stack of
   dim×dim kernels, each made from its own seed) with ``ocp.StandardCheckpointer`` (that process
   holds them all: Orbax saves a whole tree);
2. in another fresh process, exports ``x -> tanh(x @ W_i)`` over all kernels with
   ``Weights(abstract, <checkpoint folder>)`` and ``output_path`` (external data), and reports its
   peak RSS from just before ``to_onnx`` (target, issue #34: at most the largest tensor + 1 GiB),
   wall and CPU time;
3. checks every kernel in the weights file against the kernel made again from its seed (bit for
   bit, read through a memory map), and with ``--run-ort`` runs the model in onnxruntime against
   JAX computed layer by layer.

Writes bench/results/orbax_stream.json. Not a test: nothing here asserts; the numbers are reported.
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

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def kernel(i: int, dim: int) -> np.ndarray:
    rng = np.random.default_rng(1000 + i)
    return (rng.standard_normal((dim, dim), dtype=np.float32) / np.float32(np.sqrt(dim))).astype(np.float32)


SAVE = r"""
import sys
import orbax.checkpoint as ocp
sys.path.insert(0, sys.argv[4])
from orbax_stream import kernel
path, n_layers, dim = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
checkpointer = ocp.StandardCheckpointer()
checkpointer.save(path, {"layers": [{"w": kernel(i, dim)} for i in range(n_layers)]})
checkpointer.wait_until_finished()
"""

EXPORT = r"""
import json, sys, time
import jax, jax.numpy as jnp
from jax2onnx import Weights, to_onnx

sys.path.insert(0, sys.argv[5])  # bench/
from peak_rss import measure

path, out, n_layers, dim = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
abstract = {"layers": [{"w": jax.ShapeDtypeStruct((dim, dim), jnp.float32)} for _ in range(n_layers)]}

def forward(params, x):
    for p in params["layers"]:
        x = jnp.tanh(x @ p["w"])
    return x

import orbax.checkpoint  # imported before the baseline: the reader's code is not the export's memory
print(json.dumps(measure(lambda: to_onnx(forward, [Weights(abstract, path), ("B", dim)], output_path=out,
                                          external_data=True))))
"""


def check_weights(onnx_path: str, n_layers: int, dim: int) -> int:
    """Kernels in the weights file that are not the saved ones (0: all equal, bit for bit)."""
    import onnx

    model = onnx.load(onnx_path, load_external_data=False)
    folder = os.path.dirname(onnx_path)
    wrong = 0
    for t in model.graph.initializer:
        if not t.name.startswith("layers."):
            continue
        info = {e.key: e.value for e in t.external_data}
        data = np.memmap(os.path.join(folder, info["location"]), dtype=np.float32, mode="r",
                         offset=int(info.get("offset", 0)), shape=(dim, dim))
        wrong += not np.array_equal(data, kernel(int(t.name.split(".")[1]), dim))
    return wrong


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--params", type=float, default=1.07e9)
    ap.add_argument("--dim", type=int, default=4096)
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--run-ort", action="store_true")
    args = ap.parse_args()
    n_layers = max(1, round(args.params / (args.dim * args.dim)))
    layer_mib = args.dim * args.dim * 4 / 2**20
    work = args.workdir or tempfile.mkdtemp(prefix="jax2onnx-orbax-")
    os.makedirs(work, exist_ok=True)
    ckpt, onnx_path = os.path.join(work, "ckpt"), os.path.join(work, "model.onnx")
    result: dict[str, object] = {"layers": n_layers, "dim": args.dim, "params": n_layers * args.dim * args.dim,
                                 "largest_tensor_mib": layer_mib, "target_increase_mib": layer_mib + 1024}
    try:
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", SAVE, ckpt, str(n_layers), str(args.dim), HERE], check=True)
        result["save_checkpoint_s"] = time.perf_counter() - t
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", EXPORT, ckpt, onnx_path, str(n_layers), str(args.dim), HERE],
                              capture_output=True, text=True, check=False)
        result["export_process_s"] = time.perf_counter() - t
        if proc.returncode != 0:
            result["export_error"] = proc.stderr[-2000:]
        else:
            result.update(json.loads(proc.stdout.strip().splitlines()[-1]))
            result["kernels_not_equal_to_saved"] = check_weights(onnx_path, n_layers, args.dim)
            if args.run_ort:
                import jax.numpy as jnp
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.add_session_config_entry("session.disable_prepacking", "1")  # no second copy of the weights
                sess = ort.InferenceSession(onnx_path, options, providers=["CPUExecutionProvider"])
                x = np.random.default_rng(0).standard_normal((2, args.dim)).astype(np.float32)
                got = sess.run(None, {sess.get_inputs()[0].name: x})[0]
                del sess
                ref = x
                for i in range(n_layers):  # one kernel in memory at a time
                    ref = np.asarray(jnp.tanh(jnp.asarray(ref) @ kernel(i, args.dim)))
                result["max_abs_diff_vs_jax"] = float(np.max(np.abs(got - ref)))
    finally:
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "orbax_stream.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

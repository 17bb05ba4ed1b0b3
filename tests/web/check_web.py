"""The README's quickstart MLP, a CNN and a pre-LN transformer layer, exported with
``export_mode="web"`` and run in onnxruntime-web (wasm backend) under Node, compared with JAX.

    npm install --prefix tests/web && python tests/web/check_web.py      (what `nox -s web` does)

Each model is exported at the default opset and at the floor opset (17), for two batch sizes
through one symbolic batch dim. Exits 1 naming every mismatch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile

import jax
import numpy as np
from flax import nnx
from jax2onnx import to_onnx
from jax2onnx.opsets import DEFAULT_OPSET, MIN_OPSET
from jax2onnx.verification import jax_reference
from jax2onnx_nnx.cases.models import PreLNTransformerLayer, QuickstartMLP, SmallCNN

HERE = os.path.dirname(os.path.abspath(__file__))
RTOL, ATOL = 1e-4, 1e-5


def models() -> list[tuple[str, object, tuple, list[tuple[int, ...]]]]:
    """name, model, input spec, concrete input shapes (two batch sizes)."""
    mlp = QuickstartMLP(30, 20, 10, rngs=nnx.Rngs(0))
    cnn = SmallCNN(rngs=nnx.Rngs(1))
    layer = PreLNTransformerLayer(rngs=nnx.Rngs(2))
    for m in (mlp, cnn, layer):
        m.eval()  # inference: BatchNorm's running stats, no dropout
    return [
        ("quickstart_mlp", mlp, ("B", 30), [(1, 30), (5, 30)]),
        ("cnn", cnn, ("B", 8, 8, 1), [(1, 8, 8, 1), (3, 8, 8, 1)]),
        ("transformer_layer", layer, ("B", 6, 16), [(1, 6, 16), (2, 6, 16)]),
    ]


def node() -> str:
    exe = shutil.which("node")
    if exe is None:
        sys.exit("node is not on PATH: onnxruntime-web runs under Node.js (install nodejs)")
    if not os.path.isdir(os.path.join(HERE, "node_modules", "onnxruntime-web")):
        sys.exit(f"onnxruntime-web is not installed: npm install --prefix {HERE}")
    return exe


def main() -> int:
    exe = node()
    rng = np.random.default_rng(0)
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="jax2onnx-web-") as tmp:
        jobs, expected = [], {}
        for name, model, spec, shapes in models():
            for opset in (DEFAULT_OPSET, MIN_OPSET):
                path = os.path.join(tmp, f"{name}_opset{opset}.onnx")
                proto = to_onnx(model, [spec], opset=opset, export_mode="web", output_path=path)
                ops = sorted({n.op_type for n in proto.graph.node})
                print(f"{name} opset {opset}: {len(proto.graph.node)} nodes {ops}")
                for k, shape in enumerate(shapes):
                    x = rng.uniform(-1, 1, shape).astype(np.float32)
                    folder = os.path.join(tmp, f"{name}_opset{opset}_{k}")
                    os.makedirs(folder)
                    x.tofile(os.path.join(folder, "x.bin"))
                    inputs = [{"name": proto.graph.input[0].name, "dtype": "float32", "shape": list(shape),
                               "file": os.path.join(folder, "x.bin")}]
                    jobs.append({"model": path, "inputs": inputs, "out": os.path.join(folder, "out")})
                    expected[jobs[-1]["out"]] = (f"{name} opset {opset} input {shape}",
                                                 [np.asarray(a) for a in jax.tree_util.tree_leaves(jax_reference(model, [x]))])
        job_file = os.path.join(tmp, "jobs.json")
        with open(job_file, "w", encoding="utf-8") as f:
            json.dump(jobs, f)
        subprocess.run([exe, os.path.join(HERE, "run_ort_web.mjs"), job_file], check=True, cwd=HERE)
        for out, (label, want) in expected.items():
            with open(os.path.join(out, "outputs.json"), encoding="utf-8") as f:
                meta = json.load(f)
            got = [np.fromfile(os.path.join(out, f"{i}.bin"), dtype=m["dtype"]).reshape(m["shape"]) for i, m in enumerate(meta)]
            if len(got) != len(want):
                failures.append(f"{label}: {len(got)} outputs from onnxruntime-web, {len(want)} from JAX")
                continue
            for i, (g, w) in enumerate(zip(got, want)):
                diff = float(np.max(np.abs(g - w))) if g.size else 0.0
                ok = g.shape == w.shape and np.allclose(g, w, rtol=RTOL, atol=ATOL)
                print(f"{label} output {i}: {'match' if ok else 'MISMATCH'} (max abs diff {diff:.3g})")
                if not ok:
                    failures.append(f"{label} output {i}: shapes {g.shape} vs {w.shape}, max abs diff {diff:.3g}")
    if failures:
        print("onnxruntime-web disagrees with JAX:\n  " + "\n  ".join(failures))
        return 1
    print(f"onnxruntime-web matches JAX on {len(expected)} runs ({len(expected) // 2} exports)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

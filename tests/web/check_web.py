"""The README's quickstart MLP, a CNN and a pre-LN transformer layer, exported with
``export_mode="web"`` and run in onnxruntime-web (wasm backend) under Node, compared with JAX;
and a float64/int64 function (argmax, cumsum, gather with int64 indices, sort, a norm): the wasm
backend is onnxruntime's CPU kernel set compiled to WebAssembly, so these paths run there too
(WebGPU, which lacks them, is not what this checks).

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
import jax.numpy as jnp
import jax2onnx
import numpy as np
from flax import nnx
from jax2onnx import compat, to_onnx
from jax2onnx.ir.opsets import DEFAULT_OPSET
from jax2onnx.verification.compare import jax_reference
from jax2onnx_nnx.testcases.models import PreLNTransformerLayer, QuickstartMLP, SmallCNN

#: The older opset the web session checks beside the default: 17, as docs/opsets.md states (the
#: opsets below it, 13-16, are checked in onnxruntime by `nox -s tests`).
WEB_OLD_OPSET = 17

HERE = os.path.dirname(os.path.abspath(__file__))
#: The node runner core ships (allclose_onnxruntime_web uses it); it finds onnxruntime-web in its cwd.
RUNNER = os.path.join(os.path.dirname(jax2onnx.__file__), "targets", "web", "run_ort_web.mjs")
RTOL, ATOL = 1e-4, 1e-5


def _wide(x, idx):
    a = jnp.argmax(x, axis=1)
    c = jnp.cumsum(a * 3 + idx.sum(), axis=0)
    g = jnp.take(x, idx, axis=1)
    return c, g.sum(-1) + jnp.sort(x, axis=-1)[:, 0], jnp.linalg.norm(x, axis=-1)


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
            for opset in (DEFAULT_OPSET, WEB_OLD_OPSET):
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
        subprocess.run([exe, RUNNER, job_file], check=True, cwd=HERE)
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
        failures += check_wide(exe, tmp)
    if failures:
        print("onnxruntime-web disagrees with JAX:\n  " + "\n  ".join(failures))
        return 1
    print(f"onnxruntime-web matches JAX on {len(expected)} runs of {len(expected) // 2} exports, and on the float64/int64 function")
    return 0


def check_wide(exe: str, tmp: str) -> list[str]:
    """float64 and int64 through the wasm backend, exactly (rtol 1e-12)."""
    rng = np.random.default_rng(1)
    x, idx = rng.standard_normal((4, 5)), np.array([0, 4, 2], np.int64)
    folder = os.path.join(tmp, "wide")
    os.makedirs(folder)
    path = os.path.join(folder, "wide.onnx")
    proto = to_onnx(_wide, [jax.ShapeDtypeStruct(("B", 5), np.float64), jax.ShapeDtypeStruct((3,), np.int64)],
                    enable_double_precision=True, export_mode="web", output_path=path)
    x.tofile(os.path.join(folder, "x.bin"))
    idx.tofile(os.path.join(folder, "idx.bin"))
    inputs = [{"name": proto.graph.input[0].name, "dtype": "float64", "shape": list(x.shape), "file": os.path.join(folder, "x.bin")},
              {"name": proto.graph.input[1].name, "dtype": "int64", "shape": list(idx.shape), "file": os.path.join(folder, "idx.bin")}]
    job_file = os.path.join(folder, "job.json")
    with open(job_file, "w", encoding="utf-8") as f:
        json.dump([{"model": path, "inputs": inputs, "out": os.path.join(folder, "out")}], f)
    subprocess.run([exe, RUNNER, job_file], check=True, cwd=HERE)
    with compat.x64_enabled(True):
        want = [np.asarray(a) for a in jax.tree_util.tree_leaves(jax_reference(_wide, [x, idx]))]
    with open(os.path.join(folder, "out", "outputs.json"), encoding="utf-8") as f:
        meta = json.load(f)
    failures = []
    for i, (m, w) in enumerate(zip(meta, want)):
        g = np.fromfile(os.path.join(folder, "out", f"{i}.bin"), dtype=m["dtype"]).reshape(m["shape"])
        ok = g.dtype == w.dtype and g.shape == w.shape and np.allclose(g, w, rtol=1e-12, atol=1e-12)
        print(f"float64/int64 function output {i} ({g.dtype}): {'match' if ok else 'MISMATCH'}")
        if not ok:
            failures.append(f"float64/int64 function output {i}: {g.dtype}{g.shape} vs {w.dtype}{w.shape}")
    return failures


if __name__ == "__main__":
    sys.exit(main())

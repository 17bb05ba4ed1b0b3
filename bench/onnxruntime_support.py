"""Measure which onnxruntime releases run which opsets, as ``to_onnx`` writes them.

    python bench/onnxruntime_support.py 1.15.1 1.16.3 1.17.3 1.18.1 1.21.1 1.22.0 1.23.2 1.24.3

Each onnxruntime version is installed with uv into its own venv under a temp folder (the Python
running this script, numpy < 2 where the wheel needs it). For every opset from
``jax2onnx.ir.opsets.MIN_OPSET`` to the newest the installed onnx knows, a probe model is stamped with
that opset and the IR version ``to_onnx`` writes for it; it holds the ops re-versioned most often
(Transpose, Shape, Reshape, Unsqueeze, Squeeze, Cast), so "runs" means the runtime loads the IR
version, accepts the opset and has a kernel for those ops at that opset. The printed dict is
``jax2onnx.ir.opsets.MIN_ONNXRUNTIME``; docs/opsets.md shows it as a table.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from jax2onnx.ir.opsets import MIN_OPSET, ir_version, max_opset
from onnx import TensorProto, helper, numpy_helper

PROBE = r"""
import json, sys, numpy as np, onnxruntime as ort
ort.set_default_logger_severity(3)
out = {}
for path in sys.argv[1:]:
    try:
        s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        s.run(None, {"x": np.ones((2, 3), np.float32)})
        out[path] = "ok"
    except Exception as e:
        out[path] = str(e).splitlines()[0][-200:]
print(json.dumps({"version": ort.__version__, "results": out}))
"""


def probe_model(opset: int) -> onnx.ModelProto:
    vi = helper.make_tensor_value_info
    nodes = [
        helper.make_node("Add", ["x", "x"], ["a"]),
        helper.make_node("Transpose", ["a"], ["t"], perm=[1, 0]),
        helper.make_node("Shape", ["t"], ["s"]),
        helper.make_node("Reshape", ["t", "s"], ["r"]),
        helper.make_node("Unsqueeze", ["r", "axes"], ["u"]),
        helper.make_node("Squeeze", ["u", "axes"], ["q"]),
        helper.make_node("Cast", ["q"], ["c"], to=TensorProto.DOUBLE),
        helper.make_node("Cast", ["c"], ["y"], to=TensorProto.FLOAT),
    ]
    graph = helper.make_graph(nodes, f"probe{opset}", [vi("x", TensorProto.FLOAT, [2, 3])], [vi("y", TensorProto.FLOAT, [3, 2])],
                              initializer=[numpy_helper.from_array(np.array([0], np.int64), "axes")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version(opset)
    onnx.checker.check_model(model, full_check=True)
    return model


def main(versions: list[str]) -> None:
    opsets = list(range(MIN_OPSET, max_opset() + 1))
    runs: dict[str, dict[int, bool]] = {}
    with tempfile.TemporaryDirectory(prefix="ort-support-") as tmp:
        paths = {}
        for opset in opsets:
            paths[opset] = os.path.join(tmp, f"opset{opset}.onnx")
            onnx.save(probe_model(opset), paths[opset])
        for version in versions:
            venv = os.path.join(tmp, f"ort{version}")
            subprocess.run(["uv", "venv", "-q", "--python", sys.executable, venv], check=True)
            numpy = "numpy<2" if tuple(int(p) for p in version.split(".")[:2]) < (1, 19) else "numpy"
            env = {**os.environ, "VIRTUAL_ENV": venv}
            subprocess.run(["uv", "pip", "install", "-q", f"onnxruntime=={version}", numpy], check=True, env=env)
            raw = subprocess.run([os.path.join(venv, "bin", "python"), "-c", PROBE, *paths.values()],
                                 check=True, capture_output=True, text=True).stdout
            results = json.loads(raw)["results"]
            runs[version] = {opset: results[paths[opset]] == "ok" for opset in opsets}
            print(version, "runs opsets", [o for o in opsets if runs[version][o]], flush=True)
    key = lambda v: tuple(int(p) for p in v.split("."))  # noqa: E731
    table = {}
    for opset in opsets:
        ok = sorted((v for v in versions if runs[v][opset]), key=key)
        if ok:
            table[opset] = ".".join(ok[0].split(".")[:2])
    print(table)


if __name__ == "__main__":
    main(sys.argv[1:] or ["1.15.1", "1.16.3", "1.17.3", "1.18.1", "1.20.1", "1.21.1", "1.22.0", "1.23.2", "1.24.3", "1.25.1", "1.31.0", "1.32.0"])

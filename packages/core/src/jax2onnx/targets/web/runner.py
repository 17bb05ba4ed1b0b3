"""The web target's verification runner: a model run in onnxruntime-web's wasm backend under
Node.js (``run_ort_web.mjs`` beside this module; ``allclose_onnxruntime_web`` compares its outputs
with onnxruntime's CPU provider, and tests/web/check_web.py runs the script too)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence

import numpy as np

#: Where the node runner looks for the ``onnxruntime-web`` npm package when ``node_modules`` is not
#: given: this environment variable, else the current folder (``npm install onnxruntime-web`` there).
ORT_WEB_DIR_ENV = "JAX2ONNX_ORT_WEB_DIR"
#: The Node.js script that runs a model in onnxruntime-web.
WEB_RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_ort_web.mjs")
#: numpy dtype -> onnxruntime-web tensor type the runner builds (its typed arrays).
WEB_DTYPES = {"float32", "float64", "int32", "int64", "uint8", "int8", "bool"}


class WebRunnerUnavailable(RuntimeError):
    """What is missing to run onnxruntime-web here (Node.js, the npm package, a dtype it takes), in words."""


def node_modules_folder(node_modules: str | os.PathLike[str] | None) -> str:
    """The folder holding ``node_modules/onnxruntime-web``: the one given, else
    ``$JAX2ONNX_ORT_WEB_DIR``, else the current folder."""
    return os.fspath(node_modules) if node_modules is not None else os.environ.get(ORT_WEB_DIR_ENV, os.getcwd())


def setup_problem(node_command: str = "node", node_modules: str | os.PathLike[str] | None = None) -> str | None:
    """What is missing to run onnxruntime-web here (Node.js, the npm package), in words; None: nothing."""
    if shutil.which(node_command) is None:
        return f"Node.js command not found: {node_command!r}; install Node.js to run onnxruntime-web"
    folder = node_modules_folder(node_modules)
    if not os.path.isdir(os.path.join(folder, "node_modules", "onnxruntime-web")):
        return (f"onnxruntime-web is not installed in {folder}: run `npm install onnxruntime-web` there, "
                f"or pass node_modules=<folder> / set {ORT_WEB_DIR_ENV}")
    return None


def dtype_problem(values: Sequence[np.ndarray]) -> str | None:
    """The input dtypes onnxruntime-web's runner cannot build, in words; None: it takes them all."""
    bad = sorted({str(v.dtype) for v in values} - WEB_DTYPES)
    return f"onnxruntime-web validation does not support input dtype(s) {bad}" if bad else None


def run_web(path: str, values: Sequence[np.ndarray], *, node_command: str = "node",
            node_modules: str | os.PathLike[str] | None = None) -> list[np.ndarray]:
    """The outputs of the model file ``path`` run in onnxruntime-web on ``values`` (its graph
    inputs, in order, as ONNX takes them); raises :class:`WebRunnerUnavailable` naming what is
    missing, or RuntimeError with the runner's last line when onnxruntime-web failed."""
    return run_web_many([(path, values)], node_command=node_command, node_modules=node_modules)[0]


def run_web_many(jobs: Sequence[tuple[str, Sequence[np.ndarray]]], *, node_command: str = "node",
                 node_modules: str | os.PathLike[str] | None = None) -> list[list[np.ndarray]]:
    """:func:`run_web` for several ``(path, values)`` in one Node.js process (onnxruntime-web's wasm
    is loaded once): each model's outputs, in the order given."""
    problem = setup_problem(node_command, node_modules) or dtype_problem([v for _, vs in jobs for v in vs])
    if problem is not None:
        raise WebRunnerUnavailable(problem)
    exe, folder = shutil.which(node_command), node_modules_folder(node_modules)
    with tempfile.TemporaryDirectory(prefix="jax2onnx-web-") as tmp:
        listed = []
        for k, (path, values) in enumerate(jobs):
            feeds = []
            for i, (graph_name, v) in enumerate(zip(_input_names(path), values)):
                file = os.path.join(tmp, f"in{k}_{i}.bin")
                np.ascontiguousarray(v).astype(np.uint8 if v.dtype == bool else v.dtype).tofile(file)
                feeds.append({"name": graph_name, "dtype": str(v.dtype), "shape": list(v.shape), "file": file})
            listed.append({"model": path, "inputs": feeds, "out": os.path.join(tmp, f"out{k}")})
        job = os.path.join(tmp, "job.json")
        with open(job, "w", encoding="utf-8") as f:
            json.dump(listed, f)
        done = subprocess.run([exe, WEB_RUNNER, job], capture_output=True, text=True, check=False,
                              env={**os.environ, ORT_WEB_DIR_ENV: os.path.abspath(folder)})
        if done.returncode != 0:
            details = (done.stderr or done.stdout).strip().splitlines()
            raise RuntimeError(f"onnxruntime-web failed: {details[-1] if details else done.returncode}")
        results = []
        for entry in listed:
            with open(os.path.join(entry["out"], "outputs.json"), encoding="utf-8") as f:
                meta = json.load(f)
            results.append([np.fromfile(os.path.join(entry["out"], f"{i}.bin"), dtype=_np_dtype(m["dtype"]))
                            .reshape(m["shape"]) for i, m in enumerate(meta)])
        return results


def _input_names(path: str) -> list[str]:
    import onnx

    model = onnx.load(path, load_external_data=False)
    init = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in init]


def _np_dtype(web_type: str) -> np.dtype:
    return np.dtype(np.bool_) if web_type == "bool" else np.dtype(web_type)


__all__ = ["ORT_WEB_DIR_ENV", "WEB_DTYPES", "WEB_RUNNER", "WebRunnerUnavailable", "dtype_problem", "node_modules_folder",
           "run_web", "run_web_many", "setup_problem"]

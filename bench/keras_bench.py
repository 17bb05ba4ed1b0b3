"""Keras models exported by Keras's own ``model.export(format="onnx")`` through three converters:
ours with the Keras pack, ours without it, and the peer (jax2onnx 0.17.1, its own venv), against
Keras itself (``model.predict`` and a jitted ``model(x, training=False)``) on JAX.

    python bench/keras_bench.py --peer-python /path/to/peer/bin/python [--models resnet50,bilstm] [--runs 20]

Same weights everywhere (saved once, loaded by each export process). Per side: export time, node
count, onnxruntime latency (CPU, one thread pool, interleaved runs, median), max abs diff against
Keras. Writes bench/results/keras.md. Not a test: nothing here asserts timings.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

SIDES = ("ours", "ours, no Keras pack", "peer 0.17.1")


def export(python: str, name: str, weights: str, out: str, *extra: str) -> dict:
    proc = subprocess.run([python, os.path.join(HERE, "keras_worker.py"), name, weights, out, *extra],
                          capture_output=True, text=True, env={**os.environ, "KERAS_BACKEND": "jax"})
    for line in proc.stdout.splitlines():
        if line.startswith("BENCH_RESULT "):
            return json.loads(line[len("BENCH_RESULT "):])
    return {"ok": False, "error": (proc.stderr or proc.stdout)[-400:]}


def median_ms(fn, runs: int) -> float:
    fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return 1000 * statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer-python", default="/work/venv-peer/bin/python")
    ap.add_argument("--models", default="resnet50,bilstm")
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()

    import jax
    import keras
    import keras_models
    import onnx
    import onnxruntime as ort

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            model, x = keras_models.build(name)
            weights = os.path.join(tmp, f"{name}.weights.h5")
            model.save_weights(weights)
            want = np.asarray(model(x, training=False))
            jitted = jax.jit(lambda v: model(v, training=False))
            keras_jit = median_ms(lambda: jax.block_until_ready(jitted(x)), args.runs)
            keras_predict = median_ms(lambda: model.predict(x, verbose=0), args.runs)
            sides = {
                SIDES[0]: (sys.executable, ()),
                SIDES[1]: (sys.executable, ("--no-pack",)),
                SIDES[2]: (args.peer_python, ()),
            }
            sessions = {}
            for side, (python, extra) in sides.items():
                out = os.path.join(tmp, f"{name}-{len(sessions)}.onnx")
                if not os.path.exists(python):
                    rows.append((name, side, "no interpreter", "", "", ""))
                    continue
                res = export(python, name, weights, out, *extra)
                if not res["ok"]:
                    rows.append((name, side, "export failed: " + res["error"].replace("|", "/").replace("\n", " "), "", "", ""))
                    continue
                proto = onnx.load(out)
                feed = {proto.graph.input[0].name: x}
                try:
                    sess = ort.InferenceSession(out, providers=["CPUExecutionProvider"])
                    got = sess.run(None, feed)[0]
                except Exception as exc:  # noqa: BLE001 - e.g. a model onnxruntime rejects
                    msg = str(exc).replace("|", "/").replace("\n", " ")
                    rows.append((name, side, f"exported ({len(proto.graph.node)} nodes); onnxruntime fails: "
                                 f"{msg[-160:]}", str(len(proto.graph.node)), "", ""))
                    continue
                sessions[side] = (sess, feed, len(proto.graph.node), float(np.abs(got - want).max()), res["export_s"])
            lat = {side: [] for side in sessions}
            for _ in range(args.runs):  # interleaved, so load on the machine hits every side alike
                for side, (sess, feed, *_rest) in sessions.items():
                    t = time.perf_counter()
                    sess.run(None, feed)
                    lat[side].append(time.perf_counter() - t)
            for side, (_s, _f, nodes, diff, export_s) in sessions.items():
                rows.append((name, side, f"{export_s:.1f} s", str(nodes), f"{1000 * statistics.median(lat[side]):.2f}",
                             f"{diff:.2g}"))
            rows.append((name, "Keras jit(model) on JAX", "", "", f"{keras_jit:.2f}", ""))
            rows.append((name, "Keras model.predict", "", "", f"{keras_predict:.2f}", ""))
            keras.backend.clear_session()
    lines = [
        "# Keras models: export and onnxruntime latency",
        "",
        f"keras {keras.__version__}, jax {jax.__version__}, onnxruntime {ort.__version__}, {args.runs} runs, "
        f"{os.cpu_count()} CPUs (shared machine: compare sides within one table, not across runs)",
        "",
        "| model | side | export | nodes | latency ms (median) | max abs diff vs Keras |",
        "|---|---|---|---|---|---|",
        *[f"| {' | '.join(r)} |" for r in rows],
    ]
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "keras.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()

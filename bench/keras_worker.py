"""One export in a fresh process: ``python keras_worker.py NAME WEIGHTS OUT.onnx [--no-pack]``.

Runs under our interpreter or the peer's (both import ``jax2onnx``); prints ``BENCH_RESULT {json}``."""

from __future__ import annotations

import json
import os
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

name, weights, out = sys.argv[1:4]
if "--no-pack" in sys.argv:  # ours without jax2onnx-keras: Keras's math as traced
    import importlib.metadata as md

    from jax2onnx.lower.registry import PluginRegistry, set_registry

    eps = [e for e in md.entry_points(group="jax2onnx") if e.dist.name != "jax2onnx-keras"]
    set_registry(PluginRegistry(entry_points=eps))

import keras_models  # noqa: E402

model, _ = keras_models.build(name)
model.load_weights(weights)
t0 = time.perf_counter()
try:
    model.export(out, format="onnx", verbose=False)
    result = {"ok": True, "export_s": time.perf_counter() - t0}
except Exception as exc:  # noqa: BLE001 - reported, not raised: the other sides still run
    result = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:400]}"}
print("BENCH_RESULT " + json.dumps(result), flush=True)

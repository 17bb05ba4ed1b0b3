"""What the final validation (jax2onnx.verification.validate: onnx.checker full check with strict shape
inference, and the unused-initializer check) costs on a big-ish model, against the whole export.

    python bench/validate_cost.py [--layers 48] [--width 1024]

The model: a stack of dense layers with a LayerNorm-like normalisation and a GELU each, so the
graph has a few thousand nodes and width*width*4*layers bytes of weights (~200 MB by default).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np


def build(layers: int, width: int):
    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((width, width), dtype=np.float32) / np.sqrt(width) for _ in range(layers)]
    bs = [rng.standard_normal((width,), dtype=np.float32) for _ in range(layers)]

    def fn(x):
        for w, b in zip(ws, bs):
            h = x @ w + b
            h = (h - h.mean(-1, keepdims=True)) / jnp.sqrt(h.var(-1, keepdims=True) + 1e-5)
            x = x + jax.nn.gelu(h) * jnp.tanh(h) - jnp.sin(h) * 0.1
        return x

    return fn


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=48)
    ap.add_argument("--width", type=int, default=1024)
    args = ap.parse_args()

    from jax2onnx import to_onnx
    from jax2onnx.verification import validate

    spent = []
    original = validate.validate_model

    def timed(model):
        t = time.perf_counter()
        original(model)
        spent.append(time.perf_counter() - t)

    validate.validate_model = timed  # what ValidationPass, the export's last pass, calls
    fn = build(args.layers, args.width)
    t = time.perf_counter()
    proto = to_onnx(fn, [("B", args.width)])
    total = time.perf_counter() - t
    weights = sum(np.prod(i.dims) * 4 for i in proto.graph.initializer) / 2**20
    print(f"{len(proto.graph.node)} nodes, {weights:.0f} MiB of weights: export {total:.2f} s, "
          f"validation {spent[0]:.3f} s ({100 * spent[0] / total:.1f} %)")


if __name__ == "__main__":
    main()

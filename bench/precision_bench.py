"""Precision side by side: float32, float16, bfloat16, int8, int4 exports of a GPT-2-small-sized LM
and a ViT-B-sized encoder (random weights, built from configs): file size, onnxruntime CPU latency
at 1 and 2 threads, accuracy against the float32 JAX model.

    python bench/precision_bench.py                 # the full sizes (GPT-2 small, ViT-B/16)
    python bench/precision_bench.py --size medium   # full widths, 2 layers
    python bench/precision_bench.py --size smoke    # tiny models: checks the script in a minute
    python bench/precision_bench.py --json bench/results/precision.json

LM latency is per call of the exported forward on one sequence: ``decode`` a 1-token input (the
weight-bound cost of one generated token; the export has no KV cache), ``prefill`` 128 tokens.
Top-1 agreement: the share of positions of a random 32-token input whose argmax token equals JAX
float32's (teacher-forced). Greedy agreement: 32 tokens generated greedily from the same 8-token
prompt by the ONNX model and by JAX float32, the share of equal tokens (free-running: the first
different token changes every later context, and a random-weight LM's top logits are close, so
this is the harsher figure). Accuracy on random inputs: cosine and
max abs error of the logits / features.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
from flax import nnx
from jax2onnx import Precision, to_onnx
from jax2onnx.verification.precision import cosine

SIZES = {
    #         dim, layers, heads, mlp, vocab, ctx, image, patch
    "full": dict(lm=(768, 12, 12, 3072, 50257, 1024), vit=(768, 12, 12, 3072, 224, 16)),
    # full widths, 2 layers: the per-layer figures of the full models in a fifth of the time
    "medium": dict(lm=(768, 2, 12, 3072, 50257, 1024), vit=(768, 2, 12, 3072, 224, 16)),
    "smoke": dict(lm=(128, 2, 4, 512, 1024, 64), vit=(128, 2, 4, 512, 32, 8)),
}

VARIANTS: dict[str, Any] = {
    "float32": "float32",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "int8 DynamicQuantizeMatMul": Precision("int8"),
    "int8 MatMulInteger": Precision("int8", int8_kernel="MatMulInteger"),
    "int4 b32 sym": Precision("int4", block_size=32),
    "int4 b32 sym int8-emb": Precision("int4", block_size=32, embeddings="int8"),
    "int4 b32 sym acc4": Precision("int4", block_size=32, accuracy_level=4),
    "int4 b128 asym": Precision("int4", block_size=128, symmetric=False),
}


class Block(nnx.Module):
    def __init__(self, dim: int, heads: int, mlp: int, *, rngs: nnx.Rngs):
        self.ln1 = nnx.LayerNorm(dim, rngs=rngs)
        self.attn = nnx.MultiHeadAttention(num_heads=heads, in_features=dim, decode=False, rngs=rngs)
        self.ln2 = nnx.LayerNorm(dim, rngs=rngs)
        self.fc1 = nnx.Linear(dim, mlp, rngs=rngs)
        self.fc2 = nnx.Linear(mlp, dim, rngs=rngs)

    def __call__(self, x, mask=None):
        x = x + self.attn(self.ln1(x), mask=mask)
        return x + self.fc2(nnx.gelu(self.fc1(self.ln2(x))))


class GPT(nnx.Module):
    """GPT-2's shape: token + position embeddings, pre-LN causal blocks, final LN, LM head."""

    def __init__(self, dim, layers, heads, mlp, vocab, ctx, *, rngs: nnx.Rngs):
        self.wte = nnx.Embed(vocab, dim, rngs=rngs)
        self.wpe = nnx.Embed(ctx, dim, rngs=rngs)
        self.blocks = nnx.List([Block(dim, heads, mlp, rngs=rngs) for _ in range(layers)])
        self.ln = nnx.LayerNorm(dim, rngs=rngs)
        self.head = nnx.Linear(dim, vocab, use_bias=False, rngs=rngs)

    def __call__(self, ids):
        x = self.wte(ids) + self.wpe(jnp.arange(ids.shape[1]))
        mask = nnx.make_causal_mask(ids)
        for block in self.blocks:
            x = block(x, mask)
        return self.head(self.ln(x))


class ViT(nnx.Module):
    """ViT-B's shape: conv patches, class token, position embedding, pre-LN blocks, final LN, head."""

    def __init__(self, dim, layers, heads, mlp, image, patch, *, rngs: nnx.Rngs):
        self.patch = nnx.Conv(3, dim, kernel_size=(patch, patch), strides=(patch, patch), padding="VALID", rngs=rngs)
        n = (image // patch) ** 2 + 1
        self.cls = nnx.Param(jax.random.normal(jax.random.key(1), (1, 1, dim)) * 0.02)
        self.pos = nnx.Param(jax.random.normal(jax.random.key(2), (1, n, dim)) * 0.02)
        self.blocks = nnx.List([Block(dim, heads, mlp, rngs=rngs) for _ in range(layers)])
        self.ln = nnx.LayerNorm(dim, rngs=rngs)
        self.head = nnx.Linear(dim, 1000, rngs=rngs)

    def __call__(self, x):
        x = self.patch(x)
        x = x.reshape(x.shape[0], -1, x.shape[-1])
        cls = jnp.broadcast_to(self.cls[...], (x.shape[0], 1, x.shape[-1]))
        x = jnp.concatenate([cls, x], axis=1) + self.pos[...]
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x[:, 0]))


@dataclasses.dataclass
class Row:
    model: str
    variant: str
    bytes: int
    ratio: float
    latency_ms: dict[str, float]
    cosine: float
    max_abs_error: float
    greedy_agreement: float | None = None
    top1_agreement: float | None = None


def _session(path: str, threads: int) -> ort.InferenceSession:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


def _latency(sess: ort.InferenceSession, feeds: dict[str, np.ndarray], repeats: int) -> float:
    sess.run(None, feeds)  # warm-up
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def _size(path: str) -> int:
    folder, name = os.path.split(path)
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder) if f.startswith(name))


def _greedy(step: Callable[[np.ndarray], np.ndarray], prompt: np.ndarray, n: int) -> list[int]:
    """``n`` tokens after ``prompt``, each the argmax at the last filled position. The buffer has
    a fixed length (the model is causal: later slots do not change earlier logits), so JAX
    compiles once instead of once per length."""
    ids = np.zeros((1, prompt.shape[1] + n), prompt.dtype)
    ids[:, : prompt.shape[1]] = prompt
    out = []
    for i in range(n):
        pos = prompt.shape[1] + i
        token = int(np.argmax(step(ids)[0, pos - 1]))
        out.append(token)
        ids[0, pos] = token
    return out


def bench_model(name: str, fn: Any, spec: Any, feeds_for: dict[str, np.ndarray], reference_input: np.ndarray,
                folder: str, repeats: int, lm: bool, variants: list[str]) -> list[Row]:
    rows = []
    ref = np.asarray(jax.jit(fn)(reference_input))
    jax_greedy = None
    if lm:
        prompt = reference_input[:1, :8]
        jit_fn = jax.jit(fn)
        jax_greedy = _greedy(lambda ids: np.asarray(jit_fn(ids)), prompt, 32)
    base_bytes = None
    for variant in variants:
        path = os.path.join(folder, f"{name}-{variant.replace(' ', '_')}.onnx")
        t = time.perf_counter()
        to_onnx(fn, [spec], output_path=path, external_data=True, precision=VARIANTS[variant])
        convert_s = time.perf_counter() - t
        size = _size(path)
        base_bytes = base_bytes or size
        latency = {}
        for threads in (1, 2):
            sess = _session(path, threads)
            input_name = sess.get_inputs()[0].name
            for label, x in feeds_for.items():
                latency[f"{label} {threads}t"] = _latency(sess, {input_name: x}, repeats)
        sess = _session(path, 2)
        input_name = sess.get_inputs()[0].name
        (got,) = sess.run(None, {input_name: reference_input})
        agreement = top1 = None
        if lm:
            top1 = float(np.mean(got.argmax(-1) == ref.argmax(-1)))
            tokens = _greedy(lambda ids: sess.run(None, {input_name: ids})[0], reference_input[:1, :8], 32)
            agreement = float(np.mean(np.asarray(tokens) == np.asarray(jax_greedy)))
        row = Row(name, variant, size, size / base_bytes, latency, cosine(ref, got), float(np.max(np.abs(ref - got))),
                  agreement, top1)
        rows.append(row)
        print(f"{name:4} {variant:28} {size / 2**20:8.1f} MiB ({row.ratio:.3f}x)  "
              + "  ".join(f"{k} {v:7.2f} ms" for k, v in latency.items())
              + f"  cos {row.cosine:.6f}  max|err| {row.max_abs_error:.3g}"
              + (f"  top-1 {top1:.2f}  greedy {agreement:.2f}" if agreement is not None else "") + f"  (export {convert_s:.1f} s)",
              flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--models", default="gpt,vit")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    cfg = SIZES[args.size]
    variants = [v for v in args.variants.split(",") if v]
    rng = np.random.default_rng(0)
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as folder:
        if "gpt" in args.models:
            dim, layers, heads, mlp, vocab, ctx = cfg["lm"]
            model = GPT(dim, layers, heads, mlp, vocab, ctx, rngs=nnx.Rngs(0))
            spec = jax.ShapeDtypeStruct((1, "T"), jnp.int32)
            prefill = min(128, ctx)
            feeds = {"decode": rng.integers(0, vocab, (1, 1)).astype(np.int32),
                     "prefill": rng.integers(0, vocab, (1, prefill)).astype(np.int32)}
            reference = rng.integers(0, vocab, (1, min(32, ctx))).astype(np.int32)
            rows += bench_model("gpt", model, spec, feeds, reference, folder, args.repeats, True, variants)
        if "vit" in args.models:
            dim, layers, heads, mlp, image, patch = cfg["vit"]
            model = ViT(dim, layers, heads, mlp, image, patch, rngs=nnx.Rngs(0))
            spec = jax.ShapeDtypeStruct(("B", image, image, 3), jnp.float32)
            x = rng.standard_normal((1, image, image, 3)).astype(np.float32)
            rows += bench_model("vit", model, spec, {"image": x}, x, folder, args.repeats, False, variants)
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"size": args.size, "onnxruntime": ort.__version__, "rows": [dataclasses.asdict(r) for r in rows]},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The LLM pack's fused attention ops against the decomposed attention, one decode step in onnxruntime.

    python bench/llm_attention_ops.py [--past 256] [--layers 4] [--hidden 256] [--rounds 200]

One Llama-style decoder (a ``DecoderSpec``: RMSNorm, RoPE, grouped-query attention, SwiGLU; random
weights) exported three ways with ``cache="concat"``:

- ``attention23``: ``target="onnx"``, the opset-23 ``Attention`` (past_key/past_value → present) and
  ``RotaryEmbedding``;
- ``decomposed``: the same export with the attention region declined (its body: MatMul, Softmax, ...);
- ``gqa``: ``target="onnxruntime"``, ``com.microsoft.GroupQueryAttention`` (and the norm fusions).

Each is run for one decode step (one new token after ``--past`` cached ones, batch 1) in
onnxruntime on one thread, the process pinned to one core; the sides are interleaved (the order
rotates each round) and the median process CPU time per step is printed with the machine's load
(``os.getloadavg``), and the logits' largest difference to ``decomposed`` (the ops must agree).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path


def build_spec(layers: int, hidden: int, heads: int, kv_heads: int, vocab: int):
    import jax
    import jax.numpy as jnp
    from jax2onnx_llm import DecoderSpec, attend, rotary_tables

    head = hidden // heads
    keys = iter(jax.random.split(jax.random.PRNGKey(0), 8 * layers + 4))

    def w(*shape):
        return jax.random.normal(next(keys), shape) * (1.0 / shape[0] ** 0.5)

    params = {"embed": w(vocab, hidden), "head": w(hidden, vocab),
              "layers": [{"q": w(hidden, heads * head), "k": w(hidden, kv_heads * head), "v": w(hidden, kv_heads * head),
                          "o": w(heads * head, hidden), "gate": w(hidden, 4 * hidden), "up": w(hidden, 4 * hidden),
                          "down": w(4 * hidden, hidden)} for _ in range(layers)]}

    def rms(x):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)

    def step(p, input_ids, attention_mask, position_ids, cache):
        b, s = input_ids.shape
        x = p["embed"][input_ids]
        rot = rotary_tables(position_ids, head)
        for i, layer in enumerate(p["layers"]):
            h = rms(x)
            q = (h @ layer["q"]).reshape(b, s, heads, head)
            k = (h @ layer["k"]).reshape(b, s, kv_heads, head)
            v = (h @ layer["v"]).reshape(b, s, kv_heads, head)
            x = x + attend(cache, i, q, k, v, rotary=rot).reshape(b, s, heads * head) @ layer["o"]
            h = rms(x)
            x = x + (jax.nn.silu(h @ layer["gate"]) * (h @ layer["up"])) @ layer["down"]
        return rms(x) @ p["head"], cache

    return DecoderSpec(step=step, params=params, num_layers=layers, num_heads=heads, num_kv_heads=kv_heads,
                       head_size=head, hidden_size=hidden, vocab_size=vocab, eos_token_id=vocab - 1, pad_token_id=0)


def export_variants(spec, out: Path, max_length: int) -> dict[str, Path]:
    from jax2onnx_llm import export_causal_lm, fused

    paths = {"attention23": export_causal_lm(spec, out / "a23", max_length=max_length, target="onnx"),
             "gqa": export_causal_lm(spec, out / "gqa", max_length=max_length, target="onnxruntime")}
    kind = fused.fused_kind
    fused.fused_kind = lambda ctx: None  # this process only, exports run one after the other here
    try:
        paths["decomposed"] = export_causal_lm(spec, out / "dec", max_length=max_length, target="onnx")
    finally:
        fused.fused_kind = kind
    return {name: p / "model.onnx" for name, p in paths.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--past", type=int, default=256)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=200)
    args = ap.parse_args()
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])

    import numpy as np
    import onnxruntime as ort

    spec = build_spec(args.layers, args.hidden, args.heads, args.kv_heads, args.vocab)
    with tempfile.TemporaryDirectory() as tmp:
        paths = export_variants(spec, Path(tmp), max_length=args.past + 8)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = opts.inter_op_num_threads = 1
        sessions = {n: ort.InferenceSession(str(p), opts, providers=["CPUExecutionProvider"]) for n, p in paths.items()}
        rng = np.random.default_rng(0)
        feeds = {"input_ids": np.array([[5]], np.int32), "attention_mask": np.ones((1, args.past + 1), np.int32)}
        for i in range(spec.num_layers):
            for kv in ("key", "value"):
                feeds[f"past_key_values.{i}.{kv}"] = rng.standard_normal(
                    (1, spec.num_kv_heads, args.past, spec.head_size)).astype(np.float32)
        logits = {n: s.run(["logits"], feeds)[0] for n, s in sessions.items()}
        times: dict[str, list[float]] = {n: [] for n in sessions}
        names = list(sessions)
        for r in range(args.rounds):
            for n in names[r % len(names):] + names[: r % len(names)]:
                t0 = time.process_time()
                sessions[n].run(None, feeds)
                times[n].append(time.process_time() - t0)
        result = {
            "past": args.past, "layers": args.layers, "hidden": args.hidden, "load": os.getloadavg(),
            "median_cpu_us": {n: round(statistics.median(t) * 1e6, 1) for n, t in times.items()},
            "max_abs_logit_diff_vs_decomposed": {n: float(np.abs(logits[n] - logits["decomposed"]).max()) for n in names},
        }
        print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()

"""Decode tokens/s and prefill latency: onnxruntime-genai running an exported folder vs JAX's own
jitted, cached greedy generation of the same model, on the same CPU, at 1 and 2 threads.

    python bench/llm_bench.py                      # GPT-2-small-sized Llama-style NNX model (~124 M params)
    python bench/llm_bench.py --size smoke         # tiny model: checks the script runs (seconds)
    python bench/llm_bench.py --threads 1,2 --prompt 64 --new-tokens 64 --cache shared --target onnxruntime

The model is the examples pack's NNX Llama (RMSNorm, RoPE, GQA, SwiGLU) with random weights. Each
thread count runs in a fresh process (XLA's CPU thread pool is fixed at JAX import): it exports the
folder once (``--cache``, ``--target``), then, batch 1:

- JAX: ``Llama.generate`` (``jax2onnx_llm.reference.greedy_generate``: jitted prefill + scan of
  cached decode steps); prefill latency = a jitted prefill-only call; decode tokens/s = (n - 1) /
  (time for n tokens - time for 1 token), both jitted; medians of ``--runs`` after a warm-up;
- onnxruntime-genai: ``append_tokens`` (prefill) and ``generate_next_token`` loops, the session's
  intra-op threads set in genai_config.json; same medians.

Both sides' greedy tokens are compared (they should be equal). Writes bench/results/llm.json (and
prints a table). Not a test: nothing here asserts timings.
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
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {
    # hidden, layers, heads, kv heads, intermediate, vocab: about GPT-2 small's 124 M parameters.
    "gpt2-small": dict(hidden_size=768, num_layers=12, num_heads=12, num_kv_heads=4, intermediate_size=2048,
                       vocab_size=32000, max_positions=1024),
    # A quick look at a mid-sized model (~30 M parameters).
    "small": dict(hidden_size=384, num_layers=6, num_heads=6, num_kv_heads=2, intermediate_size=1024,
                  vocab_size=16000, max_positions=512),
    "smoke": dict(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128,
                  vocab_size=256, max_positions=256),
}


def worker(args: argparse.Namespace) -> dict[str, Any]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    import onnxruntime_genai as og
    from flax import nnx
    from jax2onnx_examples.llama import Llama, LlamaConfig
    from jax2onnx_llm import export_causal_lm
    from jax2onnx_llm.reference import greedy_generate
    from jax2onnx_llm.spec import KVCache, position_ids_from_mask

    cfg = LlamaConfig(**SIZES[args.size])
    model = Llama(cfg, rngs=nnx.Rngs(0), init_scale=0.05)
    spec = model.__jax2onnx_decoder__()
    n_params = sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(spec.params))
    max_length = args.prompt + args.new_tokens
    rng = np.random.default_rng(0)
    prompt = rng.integers(3, cfg.vocab_size, size=(1, args.prompt)).astype(np.int32)
    mask = np.ones_like(prompt)

    folder = os.path.join(args.workdir, f"model-{args.size}-{args.cache}-{args.target}")
    t0 = time.perf_counter()
    export_causal_lm(model, folder, max_length=max_length, cache=args.cache, target=args.target)
    export_s = time.perf_counter() - t0
    config_path = os.path.join(folder, "genai_config.json")
    config = json.load(open(config_path))
    config["model"]["decoder"]["session_options"]["intra_op_num_threads"] = args.threads
    config["model"]["decoder"]["session_options"]["inter_op_num_threads"] = 1
    json.dump(config, open(config_path, "w"), indent=4)

    # JAX: the model's own jitted cached generation, and a jitted prefill alone.
    def prefill(params, ids, m):
        shape = (1, cfg.num_kv_heads, max_length, cfg.head_size)
        empty = tuple(jnp.zeros(shape) for _ in range(cfg.num_layers))
        full = jnp.zeros((1, max_length), jnp.int32).at[:, : ids.shape[1]].set(m)
        kv = KVCache(empty, empty, full, "shared", length=jnp.int32(ids.shape[1]))
        logits, kv = spec.step(params, ids, full, position_ids_from_mask(full, ids.shape[1], ids.shape[1]), kv)
        return jnp.argmax(logits[:, -1], -1), kv.keys[0]

    prefill_jit = jax.jit(prefill)
    jax.block_until_ready(prefill_jit(spec.params, prompt, mask))
    jax_tokens = greedy_generate(spec, prompt, mask, args.new_tokens)  # compiles
    greedy_generate(spec, prompt, mask, 1)  # prefill + one token: the decode rate is the difference
    jax_prefill, jax_total, jax_one = [], [], []
    for _ in range(args.runs):
        t = time.perf_counter()
        jax.block_until_ready(prefill_jit(spec.params, prompt, mask))
        jax_prefill.append(time.perf_counter() - t)
        t = time.perf_counter()
        greedy_generate(spec, prompt, mask, args.new_tokens)
        jax_total.append(time.perf_counter() - t)
        t = time.perf_counter()
        greedy_generate(spec, prompt, mask, 1)
        jax_one.append(time.perf_counter() - t)

    og_model = og.Model(folder)
    genai_prefill, genai_decode = [], []
    genai_tokens = None
    for run in range(args.runs + 1):  # the first run warms up
        params = og.GeneratorParams(og_model)
        params.set_search_options(do_sample=False, max_length=max_length, batch_size=1)
        gen = og.Generator(og_model, params)
        t = time.perf_counter()
        gen.append_tokens(prompt)
        t_prefill = time.perf_counter() - t
        t = time.perf_counter()
        while not gen.is_done():
            gen.generate_next_token()
        t_decode = time.perf_counter() - t
        genai_tokens = list(np.asarray(gen.get_sequence(0))[args.prompt:])
        if run:
            genai_prefill.append(t_prefill)
            genai_decode.append(t_decode)
        del gen

    jp, jt, j1 = statistics.median(jax_prefill), statistics.median(jax_total), statistics.median(jax_one)
    gp, gd = statistics.median(genai_prefill), statistics.median(genai_decode)
    # genai's append_tokens also computes the first new token; its decode loop makes the other n-1.
    return {
        "size": args.size, "params_millions": round(n_params / 1e6, 1), "threads": args.threads,
        "cache": args.cache, "target": args.target, "prompt": args.prompt, "new_tokens": args.new_tokens,
        "export_s": round(export_s, 2),
        "jax_prefill_ms": round(jp * 1e3, 2), "jax_decode_tok_s": round((args.new_tokens - 1) / max(jt - j1, 1e-9), 1),
        "genai_prefill_ms": round(gp * 1e3, 2), "genai_decode_tok_s": round((args.new_tokens - 1) / max(gd, 1e-9), 1),
        "same_tokens": [int(t) for t in np.asarray(jax_tokens)[0]] == [int(t) for t in genai_tokens],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="gpt2-small", choices=sorted(SIZES))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cache", default="shared", choices=["concat", "shared"])
    ap.add_argument("--target", default="onnxruntime", choices=["onnxruntime", "onnx"])
    ap.add_argument("--json", default=os.path.join(HERE, "results", "llm.json"))
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--workdir", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        args.threads = int(args.threads)
        print(json.dumps(worker(args)))
        return
    rows = []
    with tempfile.TemporaryDirectory() as work:
        for threads in [int(t) for t in args.threads.split(",")]:
            env = dict(os.environ, KERAS_BACKEND="jax",
                       XLA_FLAGS=f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'} "
                                 f"intra_op_parallelism_threads={threads}",
                       OMP_NUM_THREADS=str(threads))
            cmd = [sys.executable, __file__, "--worker", "--threads", str(threads), "--workdir", work,
                   "--size", args.size, "--prompt", str(args.prompt), "--new-tokens", str(args.new_tokens),
                   "--runs", str(args.runs), "--cache", args.cache, "--target", args.target]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if out.returncode:
                print(out.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"worker for {threads} thread(s) failed")
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(rows, f, indent=2)
    head = ["threads", "params_millions", "jax_prefill_ms", "genai_prefill_ms", "jax_decode_tok_s",
            "genai_decode_tok_s", "same_tokens"]
    print(" | ".join(head))
    for r in rows:
        ratio = r["genai_decode_tok_s"] / max(r["jax_decode_tok_s"], 1e-9)
        print(" | ".join(str(r[h]) for h in head) + f"   (genai/JAX decode: {ratio:.2f}x)")


if __name__ == "__main__":
    main()

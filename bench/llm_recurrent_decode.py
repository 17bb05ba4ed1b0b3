"""Decode tokens/s of a hybrid (KerasHub Qwen 3.5, Gated DeltaNet + attention) and a recurrent (KerasHub
RWKV-7) model at GPT-2-small size: onnxruntime-genai on the exported folder vs KerasHub's own cached step
jitted by JAX, on the same CPU, at 1 and 4 threads (issue #41, item 5).

    python bench/llm_recurrent_decode.py [--models qwen3_5,rwkv7] [--threads 1,4] [--tokens 64] [--runs 3]
                                         [--size small|tiny]

Random weights (nothing downloaded; sizes from the families' configs scaled to GPT-2 small: hidden 768,
12 layers, vocabulary 50257). Each (model, threads) runs in a fresh process pinned to that many cores
(XLA's intra-op threads and onnxruntime's alike). Per side: the prompt's prefill, then ``--tokens``
greedy decode steps, timed apart; the median of ``--runs``. JAX: KerasHub's ``call_with_cache`` for one
token, jitted once, fed its own argmax (the loop runs on the host, as genai's). genai:
``generate_next_token`` after ``append_tokens``. Not run in CI.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

SIZES = {"small": dict(hidden=768, layers=12, heads=12, vocab=50257), "tiny": dict(hidden=64, layers=4, heads=4, vocab=512)}


def build(name: str, size: dict):
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    M, h, n, heads = keras_hub.models, size["hidden"], size["layers"], size["heads"]
    if name == "qwen3_5":  # Qwen 3.5's pattern: three linear-attention layers, then one full-attention layer
        backbone = M.Qwen3_5Backbone(
            vocabulary_size=size["vocab"], num_layers=n, num_query_heads=heads, num_key_value_heads=max(1, heads // 4),
            head_dim=h // heads, hidden_dim=h, intermediate_dim=4 * h, linear_num_key_heads=max(1, heads // 2),
            linear_num_value_heads=heads, linear_key_head_dim=h // heads, linear_value_head_dim=h // heads)
        return M.Qwen3_5CausalLM(backbone=backbone, preprocessor=None)
    backbone = M.RWKV7Backbone(hidden_size=h, head_size=h // heads, num_layers=n, vocabulary_size=size["vocab"],
                               intermediate_dim=4 * h, gate_lora=max(8, h // 6), mv_lora=max(8, h // 24),
                               aaa_lora=max(8, h // 12), decay_lora=max(8, h // 12))
    return M.RWKV7CausalLM(backbone=backbone, preprocessor=None)


def jax_decode(model, name: str, prompt: list[int], tokens: int, runs: int) -> dict:
    import statistics
    import time

    import jax
    import jax.numpy as jnp

    b = model.backbone
    if name == "qwen3_5":
        key_dim = b.linear_num_key_heads * b.linear_key_head_dim
        conv = 2 * key_dim + b.linear_num_value_heads * b.linear_value_head_dim
        length = len(prompt) + tokens
        empty = (jnp.zeros((1, b.num_layers, 2, length, b.num_key_value_heads, b.head_dim)),
                 jnp.zeros((1, b.num_layers, conv, b.linear_conv_kernel_dim - 1)),
                 jnp.zeros((1, b.num_layers, b.linear_num_value_heads, b.linear_key_head_dim, b.linear_value_head_dim)))
        step = jax.jit(lambda t, c, i: model.call_with_cache(t, c, i)[::2])
    else:
        heads = b.hidden_size // b.head_size
        empty = [jnp.zeros((1, b.num_layers, heads, b.head_size, b.head_size)),
                 jnp.zeros((1, b.num_layers, 2, 1, b.hidden_size))]
        step = jax.jit(lambda t, c, i: model.call_with_cache(t, c, rnn_mode=True)[::2])
    per_token = []
    for _ in range(runs + 1):  # the first run compiles
        cache = empty
        for i, t in enumerate(prompt):  # the prompt through the same one-token step (KerasHub's decode form)
            logits, cache = step(jnp.asarray([[t]], jnp.int32), cache, i)
        token = int(jnp.argmax(logits[0, -1]))
        start = time.perf_counter()
        for i in range(len(prompt), len(prompt) + tokens):
            logits, cache = step(jnp.asarray([[token]], jnp.int32), cache, i)
            token = int(jnp.argmax(logits[0, -1]))
        per_token.append((time.perf_counter() - start) / tokens)
    return {"tokens_per_s": 1 / statistics.median(per_token[1:])}


def genai_decode(folder: str, prompt: list[int], tokens: int, runs: int, threads: int) -> dict:
    import statistics
    import time

    import numpy as np
    import onnxruntime_genai as og

    path = os.path.join(folder, "genai_config.json")
    config = json.load(open(path))
    config["model"]["decoder"]["session_options"].update(intra_op_num_threads=threads, inter_op_num_threads=1)
    json.dump(config, open(path, "w"), indent=4)
    model = og.Model(folder)
    per_token = []
    for _ in range(runs + 1):  # the first run warms up
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=len(prompt) + tokens + 1, do_sample=False)
        generator = og.Generator(model, params)
        generator.append_tokens(np.asarray([prompt], np.int32))
        start = time.perf_counter()
        for _ in range(tokens):
            generator.generate_next_token()
        per_token.append((time.perf_counter() - start) / tokens)
    return {"tokens_per_s": 1 / statistics.median(per_token[1:])}


def worker(args: argparse.Namespace) -> None:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.threads])
    from jax2onnx_llm import export_causal_lm

    size = SIZES[args.size]
    model = build(args.models, size)
    prompt = list(range(5, 21))
    folder = os.path.join(args.workdir, f"{args.models}-{args.threads}")
    export_causal_lm(model, folder, max_length=len(prompt) + args.tokens + 8, eos_token_id=size["vocab"] - 1,
                     tokenizer=False)
    result = {"model": args.models, "size": args.size, "threads": args.threads, "tokens": args.tokens,
              "params_millions": round(model.count_params() / 1e6, 1), "load_avg": os.getloadavg()[0],
              "jax": jax_decode(model, args.models, prompt, args.tokens, args.runs),
              "genai": genai_decode(folder, prompt, args.tokens, args.runs, args.threads)}
    print(json.dumps(result))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="qwen3_5,rwkv7")
    ap.add_argument("--threads", default="1,4")
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--workdir")
    args = ap.parse_args()
    if args.worker:
        args.threads = int(args.threads)
        worker(args)
        return
    with tempfile.TemporaryDirectory() as work:
        for name in args.models.split(","):
            for threads in [int(t) for t in args.threads.split(",")]:
                env = dict(os.environ, KERAS_BACKEND="jax", OMP_NUM_THREADS=str(threads),
                           XLA_FLAGS=f"--xla_cpu_multi_thread_eigen={'true' if threads > 1 else 'false'} "
                                     f"intra_op_parallelism_threads={threads}")
                cmd = [sys.executable, __file__, "--worker", "--models", name, "--threads", str(threads),
                       "--tokens", str(args.tokens), "--runs", str(args.runs), "--size", args.size, "--workdir", work]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True)
                lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
                print(lines[-1] if lines else f"{name} threads={threads} failed: {out.stderr[-2000:]}", flush=True)


if __name__ == "__main__":
    main()

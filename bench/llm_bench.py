"""Decode tokens/s and prefill latency: onnxruntime-genai running an exported folder vs JAX's own
jitted, cached greedy generation of the same model, on the same CPU, at 1 and 2 threads.

    python bench/llm_bench.py                      # HF FlaxGPT2LMHeadModel, gpt2's config (124 M params)
    python bench/llm_bench.py --model nnx-llama    # the examples pack's Llama (GQA, RoPE) at ~GPT-2-small size
    python bench/llm_bench.py --size smoke         # tiny model: checks the script runs (seconds)
    python bench/llm_bench.py --cache concat --target onnx --profile --session-option KEY=VALUE

Models (random weights from a config, nothing downloaded): ``hf-gpt2``, transformers'
``FlaxGPT2LMHeadModel`` with GPT-2 small's values (its own attention: both targets export the same
math); ``nnx-llama``, the examples pack's Llama (RMSNorm, RoPE, GQA, SwiGLU), whose attention becomes
``GroupQueryAttention`` with ``--target onnxruntime``. Each thread count runs in a fresh process
(XLA's CPU thread pool is fixed at JAX import), pinned to that many cores, which both runtimes
share; it exports the folder once, then, batch 1, interleaving the two sides run by run:

- JAX: ``jax2onnx_llm.reference.greedy_generate`` (the model's step, jitted: prefill + a scan of
  cached decode steps over a static cache); prefill latency = a jitted prefill-only call; decode
  tokens/s = (n - 1) / (time for n tokens - time for 1 token);
- onnxruntime-genai: ``append_tokens`` (prefill, which also computes the first new token) and the
  ``generate_next_token`` loop (n - 1 tokens); intra-op threads set in genai_config.json.

Medians of ``--runs`` after a warm-up, wall-clock and process CPU time (all threads: the fair
figure on a loaded machine). ``--profile`` turns on onnxruntime's profiler in genai's session and
sums kernel time by op type. Both sides' greedy tokens are compared (they should be equal). Writes
bench/results/llm.json (and prints a table). Not a test: nothing here asserts timings.
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
# Llama-style NNX model (the examples pack's): hidden, layers, heads, kv heads, intermediate, vocab.
LLAMA_SIZES = {
    # about GPT-2 small's 124 M parameters
    "gpt2-small": dict(hidden_size=768, num_layers=12, num_heads=12, num_kv_heads=4, intermediate_size=2048,
                       vocab_size=32000, max_positions=1024),
    "small": dict(hidden_size=384, num_layers=6, num_heads=6, num_kv_heads=2, intermediate_size=1024,
                  vocab_size=16000, max_positions=512),
    "smoke": dict(hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, intermediate_size=128,
                  vocab_size=256, max_positions=256),
}
# Hugging Face FlaxGPT2LMHeadModel from a config (random weights, nothing downloaded).
GPT2_SIZES = {
    "gpt2-small": dict(n_embd=768, n_layer=12, n_head=12, vocab_size=50257, n_positions=1024),  # gpt2's values
    "small": dict(n_embd=384, n_layer=6, n_head=6, vocab_size=16000, n_positions=512),
    "smoke": dict(n_embd=64, n_layer=2, n_head=4, vocab_size=256, n_positions=256),
}
SIZES = LLAMA_SIZES


def build(args: argparse.Namespace) -> tuple[Any, Any, int]:
    """(the model export_causal_lm takes, its DecoderSpec, vocab size)."""
    if args.model == "hf-gpt2":
        import transformers

        config = transformers.GPT2Config(**GPT2_SIZES[args.size], bos_token_id=0, eos_token_id=0)
        model = transformers.FlaxGPT2LMHeadModel(config, seed=0)
        from jax2onnx_llm.frontends import decoder_spec

        return model, decoder_spec(model), config.vocab_size
    from flax import nnx
    from jax2onnx_examples.llama import Llama, LlamaConfig

    cfg = LlamaConfig(**LLAMA_SIZES[args.size])
    model = Llama(cfg, rngs=nnx.Rngs(0), init_scale=0.05)
    return model, model.__jax2onnx_decoder__(), cfg.vocab_size


def op_profile(path: str, top: int = 12) -> dict[str, Any]:
    """onnxruntime's profile (a chrome trace) summed by op type: where the session's time goes."""
    return op_profile_events(json.load(open(path)), top)


def op_profile_events(events: list[dict[str, Any]], top: int = 12, skip_runs: int = 0) -> dict[str, Any]:
    """A profile's events summed by op type; ``skip_runs``: the first runs left out (a generation's
    prefill, to see a decode step's time alone)."""
    model_runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                        if e.get("cat") == "Session" and e.get("name") == "model_run")
    skipped = model_runs[:skip_runs]
    by_op: dict[str, float] = {}
    runs = len(model_runs) - len(skipped)
    for e in events:
        if e.get("cat") == "Node" and e.get("name", "").endswith("_kernel_time"):
            if any(start <= e["ts"] <= end for start, end in skipped):
                continue
            op = e.get("args", {}).get("op_name", "?")
            by_op[op] = by_op.get(op, 0.0) + e["dur"]
    total = sum(by_op.values()) or 1.0
    ranked = sorted(by_op.items(), key=lambda kv: -kv[1])[:top]
    return {"runs": runs, "kernel_ms_per_run": round(total / 1e3 / max(runs, 1), 3),
            "share": {op: round(t / total, 3) for op, t in ranked},
            "ms_per_run": {op: round(t / 1e3 / max(runs, 1), 3) for op, t in ranked}}


def worker(args: argparse.Namespace) -> dict[str, Any]:
    # Pinned to `threads` cores, both runtimes alike (XLA's flags do not bound all its threads).
    cpus = sorted(os.sched_getaffinity(0))[: args.threads]
    os.sched_setaffinity(0, cpus)
    import jax
    import jax.numpy as jnp
    import numpy as np
    import onnxruntime_genai as og
    from jax2onnx_llm import export_causal_lm
    from jax2onnx_llm.reference import greedy_generate
    from jax2onnx_llm.spec import KVCache, position_ids_from_mask

    model, spec, vocab = build(args)
    n_params = sum(int(np.prod(x.shape)) for x in jax.tree_util.tree_leaves(spec.params))
    max_length = args.prompt + args.new_tokens
    rng = np.random.default_rng(0)
    prompt = rng.integers(3, vocab, size=(1, args.prompt)).astype(np.int32)
    mask = np.ones_like(prompt)

    folder = os.path.join(args.workdir, f"model-{args.model}-{args.size}-{args.cache}-{args.target}")
    t0 = time.perf_counter()
    if not os.path.isdir(folder):  # one export serves both thread counts
        export_causal_lm(model, folder, max_length=max_length, cache=args.cache, target=args.target)
    export_s = time.perf_counter() - t0
    config_path = os.path.join(folder, "genai_config.json")
    config = json.load(open(config_path))
    options = config["model"]["decoder"]["session_options"]
    options["intra_op_num_threads"] = args.threads
    options["inter_op_num_threads"] = 1
    for item in args.session_option:
        key, value = item.split("=", 1)
        options[key] = json.loads(value) if value[:1] in "{[0123456789tf" else value
    profile_prefix = os.path.join(args.workdir, f"profile-{args.threads}")
    if args.profile:
        options["enable_profiling"] = profile_prefix
    json.dump(config, open(config_path, "w"), indent=4)

    # JAX: the same step, jitted, with a static cache (reference.greedy_generate: jitted prefill +
    # a scan of cached decode steps; for the HF model, transformers' own module and cache), and a
    # jitted prefill alone.
    def prefill(params, ids, m):
        shape = (1, spec.num_kv_heads, max_length, spec.head_size)
        empty = tuple(jnp.zeros(shape) for _ in range(spec.num_layers))
        full = jnp.zeros((1, max_length), jnp.int32).at[:, : ids.shape[1]].set(m)
        kv = KVCache(empty, empty, full, "shared", length=jnp.int32(ids.shape[1]))
        logits, kv = spec.step(params, ids, full, position_ids_from_mask(full, ids.shape[1], ids.shape[1]), kv)
        return jnp.argmax(logits[:, -1], -1), kv.keys[0]

    prefill_jit = jax.jit(prefill)
    jax.block_until_ready(prefill_jit(spec.params, prompt, mask))
    jax_tokens = greedy_generate(spec, prompt, mask, args.new_tokens)  # compiles
    greedy_generate(spec, prompt, mask, 1)  # prefill + one token: the decode rate is the difference
    hf_generate = None
    if args.model == "hf-gpt2":  # transformers' own generate (greedy, its cache), jitted as its docs advise
        hf_jit = jax.jit(lambda p, ids, m, n: model.generate(ids, attention_mask=m, params=p, max_new_tokens=n,
                                                              do_sample=False, eos_token_id=None,
                                                              pad_token_id=0).sequences, static_argnums=3)

        def hf_generate(n: int) -> Any:
            return np.asarray(hf_jit(spec.params, prompt, mask, n))

        hf_tokens = hf_generate(args.new_tokens)[0, args.prompt:]
        hf_generate(1)
    og_model = og.Model(folder)

    def timed(fn: Any) -> tuple[float, float]:
        t, c = time.perf_counter(), time.process_time()
        fn()
        return time.perf_counter() - t, time.process_time() - c

    def genai_run() -> tuple[tuple[float, float], tuple[float, float], list[int]]:
        params = og.GeneratorParams(og_model)
        params.set_search_options(do_sample=False, max_length=max_length, batch_size=1)
        gen = og.Generator(og_model, params)
        pre = timed(lambda: gen.append_tokens(prompt))

        def loop() -> None:
            while not gen.is_done():
                gen.generate_next_token()

        dec = timed(loop)
        return pre, dec, list(np.asarray(gen.get_sequence(0))[args.prompt:])

    genai_run()  # warm-up
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in ("jax_prefill", "jax_n", "jax_1", "genai_prefill",
                                                                    "genai_decode", "hf_n", "hf_1")}
    genai_tokens: list[int] = []
    for r in range(args.runs):  # interleaved, the order alternating, so load changes hit both sides
        sides = ["jax", "genai"] if r % 2 == 0 else ["genai", "jax"]
        for side in sides:
            if side == "jax":
                times["jax_prefill"].append(timed(lambda: jax.block_until_ready(prefill_jit(spec.params, prompt, mask))))
                times["jax_n"].append(timed(lambda: greedy_generate(spec, prompt, mask, args.new_tokens)))
                times["jax_1"].append(timed(lambda: greedy_generate(spec, prompt, mask, 1)))
                if hf_generate is not None:
                    times["hf_n"].append(timed(lambda: hf_generate(args.new_tokens)))
                    times["hf_1"].append(timed(lambda: hf_generate(1)))
            else:
                pre, dec, genai_tokens = genai_run()
                times["genai_prefill"].append(pre)
                times["genai_decode"].append(dec)

    def med(key: str, i: int) -> float:
        return statistics.median(t[i] for t in times[key])

    n1 = args.new_tokens - 1
    out: dict[str, Any] = {
        "model": args.model, "size": args.size, "params_millions": round(n_params / 1e6, 1), "threads": args.threads,
        "cpus": cpus, "cache": args.cache, "target": args.target, "prompt": args.prompt, "new_tokens": args.new_tokens,
        "runs": args.runs, "export_s": round(export_s, 2), "session_options": args.session_option,
        "load_avg": os.getloadavg()[0],
    }
    # wall and CPU (process, all threads) per side; genai's append_tokens also computes the first
    # new token, its decode loop the other n - 1; JAX's decode is (n tokens) - (1 token).
    for kind, i in (("", 0), ("cpu_", 1)):
        out[f"jax_prefill_{kind}ms"] = round(med("jax_prefill", i) * 1e3, 2)
        out[f"genai_prefill_{kind}ms"] = round(med("genai_prefill", i) * 1e3, 2)
        span = med("jax_n", i) - med("jax_1", i)  # noise on a loaded machine can make it <= 0: no figure then
        out[f"jax_decode_{kind}tok_s"] = round(n1 / span, 1) if span > 0 else None
        out[f"genai_decode_{kind}tok_s"] = round(n1 / max(med("genai_decode", i), 1e-9), 1)
        if hf_generate is not None:
            span = med("hf_n", i) - med("hf_1", i)
            out[f"hf_generate_decode_{kind}tok_s"] = round(n1 / span, 1) if span > 0 else None
    out["same_tokens"] = [int(t) for t in np.asarray(jax_tokens)[0]] == [int(t) for t in genai_tokens]
    if hf_generate is not None:
        out["hf_generate_same_tokens"] = [int(t) for t in hf_tokens] == [int(t) for t in genai_tokens]
    if args.profile:
        del og_model  # the profile file is written when the session closes
        import gc
        import glob

        gc.collect()
        files = sorted(glob.glob(profile_prefix + "*.json"), key=os.path.getmtime)
        if files:
            out["genai_profile"] = op_profile(files[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="hf-gpt2", choices=["hf-gpt2", "nnx-llama"])
    ap.add_argument("--size", default="gpt2-small", choices=sorted(SIZES))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--cache", default="shared", choices=["concat", "shared"])
    ap.add_argument("--target", default="onnxruntime", choices=["onnxruntime", "onnx"])
    ap.add_argument("--session-option", action="append", default=[],
                    help="KEY=VALUE added to genai_config.json's session_options (JSON values parsed)")
    ap.add_argument("--profile", action="store_true", help="onnxruntime profiling: time by op type")
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
                   "--runs", str(args.runs), "--cache", args.cache, "--target", args.target, "--model", args.model,
                   *[f"--session-option={o}" for o in args.session_option], *(["--profile"] if args.profile else [])]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True)
            if out.returncode:
                print(out.stderr[-3000:], file=sys.stderr)
                raise SystemExit(f"worker for {threads} thread(s) failed")
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(rows, f, indent=2)
    head = ["threads", "params_millions", "jax_prefill_ms", "genai_prefill_ms", "jax_decode_tok_s",
            "genai_decode_tok_s", "jax_decode_cpu_tok_s", "genai_decode_cpu_tok_s", "same_tokens", "load_avg"]
    print(" | ".join(head))
    for r in rows:
        ratio = r["genai_decode_tok_s"] / (r["jax_decode_tok_s"] or float("nan"))
        cpu_ratio = r["genai_decode_cpu_tok_s"] / (r["jax_decode_cpu_tok_s"] or float("nan"))
        print(" | ".join(str(r[h]) for h in head) + f"   (genai/JAX decode: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU)")
        if r.get("hf_generate_decode_tok_s"):
            print(f"   transformers' own jitted generate: {r['hf_generate_decode_tok_s']} tok/s wall, "
                  f"{r['hf_generate_decode_cpu_tok_s']} CPU (genai/HF: "
                  f"{r['genai_decode_tok_s'] / r['hf_generate_decode_tok_s']:.2f}x wall)")
        if "genai_profile" in r:
            print("   genai profile:", json.dumps(r["genai_profile"]))


if __name__ == "__main__":
    main()

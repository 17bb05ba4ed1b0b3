"""Decode tokens/s of a Mixtral-shaped KerasHub model: onnxruntime-genai running its exported folders
vs KerasHub's own jitted, cached greedy generation (JAX), on the same pinned CPU cores.

    python bench/moe_bench.py                   # 8 experts, top-2, 4 layers, 512 wide (~60 M params)
    python bench/moe_bench.py --size smoke      # tiny: checks the script runs
    python bench/moe_bench.py --threads 2 --runs 5

The model is ``MixtralCausalLM`` from a config (random weights, nothing downloaded). Folders (batch 1,
``cache="shared"``):

- ``onnxruntime``: ``target="onnxruntime"``, the sparse blocks as ``com.microsoft.MoE`` (the k chosen
  experts per token) and attention as ``GroupQueryAttention``;
- ``onnx``: ``target="onnx"``, the library's own MoE code in standard ONNX (every expert computed
  for every token, weighted by a routing that is zero outside the top k) and opset-23 ``Attention``;
- ``onnxruntime-int4``: as ``onnxruntime`` with ``precision="int4"`` (``QMoE``, ``MatMulNBits``).

JAX, two figures: KerasHub's ``generate_function`` (what ``CausalLM.generate`` runs: jitted, a
prefill building the cache over the whole prompt + n buffer and a while-loop of cached one-token
steps), and the exported step itself (the model's ``call_with_cache`` in the adapter) jitted with a
static cache (``jax2onnx_llm.reference.greedy_generate``: prefill + a scan of decode steps); decode
tokens/s = (n - 1) / (time for n tokens - time for 1 token). Both compute every expert per token,
as KerasHub's blocks do. onnxruntime-genai: ``append_tokens``
(prefill and the first token), then the ``generate_next_token`` loop (n - 1 tokens), intra-op threads
set in genai_config.json. Runs interleave the sides, the order alternating; medians of wall-clock and
process CPU time (all threads: the fairer figure on a loaded machine), with the load average.
Greedy tokens of each folder are compared with KerasHub's. Writes bench/results/moe.json and prints
a table. Not a test: nothing here asserts timings.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
SIZES = {
    # Mixtral's shape scaled down: 8 experts, top-2, GQA 8/2 heads, sliding window off
    "mixtral-small": dict(vocabulary_size=8000, num_layers=4, num_query_heads=8, num_key_value_heads=2,
                          hidden_dim=512, intermediate_dim=1024, num_experts=8, top_k=2),
    "smoke": dict(vocabulary_size=256, num_layers=2, num_query_heads=4, num_key_value_heads=2, hidden_dim=64,
                  intermediate_dim=128, num_experts=4, top_k=2),
}
FOLDERS = {"onnxruntime": dict(target="onnxruntime"), "onnx": dict(target="onnx"),
           "onnxruntime-int4": dict(target="onnxruntime", precision="int4")}


def build(size: str) -> Any:
    import keras
    import keras_hub

    keras.utils.set_random_seed(0)
    config = SIZES[size]
    backbone = keras_hub.models.MixtralBackbone(**config, sliding_window=1 << 20)
    model = keras_hub.models.MixtralCausalLM(backbone=backbone, preprocessor=None)
    for v in backbone.weights:  # random glorot weights leave the embedding in charge: vary the tokens
        if "kernel" in v.path or "experts/" in v.path:
            v.assign(v.numpy() * 3.0)
    model.compile(sampler="greedy")
    return model


def timed(fn: Any) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def run(args: argparse.Namespace, work: str) -> dict[str, Any]:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: args.threads])
    import numpy as np
    import onnxruntime_genai as og
    from jax2onnx_llm import export_causal_lm
    from jax2onnx_llm.frontends import decoder_spec
    from jax2onnx_llm.reference import greedy_generate

    model = build(args.size)
    config = SIZES[args.size]
    params = sum(int(np.prod(w.shape)) for w in model.backbone.weights)
    max_length = args.prompt + args.new_tokens
    rng = np.random.default_rng(0)
    prompt = rng.integers(3, config["vocabulary_size"], size=(1, args.prompt)).astype(np.int32)

    generate = model.make_generate_function()

    def keras_generate(n: int) -> np.ndarray:
        ids = np.zeros((1, args.prompt + n), np.int32)
        mask = np.zeros((1, args.prompt + n), bool)
        ids[:, : args.prompt], mask[:, : args.prompt] = prompt, True
        out = generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)
        return np.asarray(out["token_ids"])[0, args.prompt:]

    keras_tokens = [int(t) for t in keras_generate(args.new_tokens)]  # compiles both lengths
    keras_generate(1)
    # the exported step itself (the model's call_with_cache), jitted with a static cache
    spec = decoder_spec(model)
    ones = np.ones_like(prompt)
    step_tokens = [int(t) for t in greedy_generate(spec, prompt, ones, args.new_tokens)[0]]
    greedy_generate(spec, prompt, ones, 1)
    eos = next(t for t in range(1, config["vocabulary_size"]) if t not in keras_tokens)  # never ends early

    out: dict[str, Any] = {"size": args.size, **config, "params_millions": round(params / 1e6, 1),
                           "threads": args.threads, "prompt": args.prompt, "new_tokens": args.new_tokens,
                           "runs": args.runs, "folders": {}}
    models, export_s = {}, {}
    for name, options in FOLDERS.items():
        folder = os.path.join(work, name)
        t = time.perf_counter()
        export_causal_lm(model, folder, max_length=max_length, cache="shared", eos_token_id=eos, pad_token_id=0,
                         **options)
        export_s[name] = round(time.perf_counter() - t, 1)
        path = os.path.join(folder, "genai_config.json")
        genai_config = json.load(open(path))
        session = genai_config["model"]["decoder"]["session_options"]
        session["intra_op_num_threads"], session["inter_op_num_threads"] = args.threads, 1
        json.dump(genai_config, open(path, "w"), indent=4)
        models[name] = og.Model(folder)

    def genai(name: str) -> tuple[tuple[float, float], list[int]]:
        p = og.GeneratorParams(models[name])
        p.set_search_options(do_sample=False, max_length=max_length, batch_size=1)
        gen = og.Generator(models[name], p)
        gen.append_tokens(prompt)

        def loop() -> None:
            while not gen.is_done():
                gen.generate_next_token()

        return timed(loop), [int(t) for t in np.asarray(gen.get_sequence(0))[args.prompt:]]

    tokens = {name: genai(name)[1] for name in models}  # warm-up
    times: dict[str, list[tuple[float, float]]] = {k: [] for k in ("keras_n", "keras_1", "step_n", "step_1", *models)}
    for r in range(args.runs):
        sides = ["keras", *models] if r % 2 == 0 else [*models, "keras"]
        for side in sides:
            if side == "keras":
                times["keras_n"].append(timed(lambda: keras_generate(args.new_tokens)))
                times["keras_1"].append(timed(lambda: keras_generate(1)))
                times["step_n"].append(timed(lambda: greedy_generate(spec, prompt, ones, args.new_tokens)))
                times["step_1"].append(timed(lambda: greedy_generate(spec, prompt, ones, 1)))
            else:
                times[side].append(genai(side)[0])

    def med(key: str, i: int) -> float:
        return statistics.median(t[i] for t in times[key])

    n1 = args.new_tokens - 1
    for kind, i in (("", 0), ("cpu_", 1)):
        span = med("keras_n", i) - med("keras_1", i)  # noise can make it <= 0 on a loaded machine: no figure
        out[f"keras_jit_decode_{kind}tok_s"] = round(n1 / span, 1) if span > 0 else None
        span = med("step_n", i) - med("step_1", i)
        out[f"step_jit_decode_{kind}tok_s"] = round(n1 / span, 1) if span > 0 else None
    out["step_jit_tokens_equal_to_keras"] = f"{sum(a == b for a, b in zip(step_tokens, keras_tokens))}/{len(keras_tokens)}"
    for name in models:
        same = sum(a == b for a, b in zip(tokens[name], keras_tokens))
        out["folders"][name] = {
            "decode_tok_s": round(n1 / med(name, 0), 1), "decode_cpu_tok_s": round(n1 / med(name, 1), 1),
            "export_s": export_s[name], "tokens_equal_to_keras": f"{same}/{len(keras_tokens)}",
            "model_mb": round(sum(os.path.getsize(os.path.join(work, name, f)) for f in os.listdir(os.path.join(
                work, name)) if f.startswith("model.onnx")) / 2**20, 1),
        }
    out["load_avg_1_5_15"] = [round(x, 2) for x in os.getloadavg()]
    out["cpus"] = os.cpu_count()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="mixtral-small", choices=sorted(SIZES))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--prompt", type=int, default=32)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--json", default=os.path.join(HERE, "results", "moe.json"))
    args = ap.parse_args()
    os.environ.setdefault("KERAS_BACKEND", "jax")
    # XLA's CPU thread pool is fixed at import: as many threads as onnxruntime gets
    os.environ["XLA_FLAGS"] = (f"--xla_cpu_multi_thread_eigen={'true' if args.threads > 1 else 'false'} "
                               f"intra_op_parallelism_threads={args.threads}")
    load_before = [round(x, 2) for x in os.getloadavg()]
    with tempfile.TemporaryDirectory() as work:
        out = run(args, work)
    out["load_avg_before"] = load_before
    print(f"{out['size']}: {out['params_millions']} M params, {args.threads} thread(s), load {out['load_avg_1_5_15']}")
    print(f"  KerasHub generate (JAX jit): {out['keras_jit_decode_tok_s']} tok/s "
          f"({out['keras_jit_decode_cpu_tok_s']} per CPU-second)")
    print(f"  the exported step, jitted (reference.greedy_generate): {out['step_jit_decode_tok_s']} tok/s "
          f"({out['step_jit_decode_cpu_tok_s']} per CPU-second), tokens = KerasHub's: "
          f"{out['step_jit_tokens_equal_to_keras']}")
    for name, row in out["folders"].items():
        print(f"  genai {name:<17} {row['decode_tok_s']:>7} tok/s ({row['decode_cpu_tok_s']} per CPU-second), "
              f"{row['model_mb']} MB, tokens = KerasHub's: {row['tokens_equal_to_keras']}")
    if args.size != "smoke":
        os.makedirs(os.path.dirname(args.json), exist_ok=True)
        json.dump(out, open(args.json, "w"), indent=2)


if __name__ == "__main__":
    main()

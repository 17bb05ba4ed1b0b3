"""jax.random in onnxruntime vs JAX-jit on the same machine: drawing 10**6 normals (and bits/uniforms).

    python bench/random_bench.py [--n 1000000] [--runs 20] [--threads 0]

The exported model takes the key as an input (``uint32[2]``), so every run draws with a fresh key,
as a served model would; JAX runs ``jax.jit`` of the same function on CPU. Prints median latency per
draw and the agreement with JAX on the last key (exact for bits/uniform, max abs diff for normal).
Asserts nothing.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np


def _median_ms(fn, runs):
    fn()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return 1e3 * statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0: its default)")
    args = parser.parse_args()

    import onnxruntime as ort
    from jax2onnx import to_onnx

    samplers = {
        "bits (uint32)": lambda key: jax.random.bits(key, (args.n,)),
        "uniform f32": lambda key: jax.random.uniform(key, (args.n,)),
        "normal f32": lambda key: jax.random.normal(key, (args.n,)),
    }
    key_spec = jax.ShapeDtypeStruct((2,), jnp.uint32)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    rng = np.random.default_rng(0)
    print(f"{platform.processor() or platform.machine()}, jax {jax.__version__}, onnxruntime {ort.__version__}, "
          f"n = {args.n}, partitionable = {jax.config.jax_threefry_partitionable}\n")
    print("| sampler | onnxruntime ms | jax.jit ms | ratio | vs JAX |")
    print("|---|---|---|---|---|")
    for name, fn in samplers.items():
        model = to_onnx(fn, [key_spec])
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        feed_name = sess.get_inputs()[0].name
        keys = [rng.integers(0, 2**32, 2, dtype=np.uint64).astype(np.uint32) for _ in range(args.runs + 1)]
        it = iter(keys * 2)
        ours = _median_ms(lambda: sess.run(None, {feed_name: next(it)}), args.runs)
        jitted = jax.jit(fn)
        jt = iter(keys * 2)
        theirs = _median_ms(lambda: jitted(next(jt)).block_until_ready(), args.runs)
        key = keys[-1]
        got = sess.run(None, {feed_name: key})[0]
        want = np.asarray(jitted(key))
        agree = "exact" if np.array_equal(got, want) else f"max abs diff {np.max(np.abs(got.astype(np.float64) - want)):.2g}"
        print(f"| {name} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f} | {agree} |")


if __name__ == "__main__":
    main()

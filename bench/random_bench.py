"""jax.random in onnxruntime vs JAX-jit on the same machine: drawing 10**6 normals (and bits,
uniforms, exponentials).

    python bench/random_bench.py [--n 1000000] [--runs 20] [--threads 0]

The exported model takes the key as an input (``uint32[2]``), so every run draws with a fresh key,
as a served model would, and draws as many numbers as its second input ``x`` (symbolic length
``N``) has elements: a static 10**6 would make onnx's shape inference (data propagation, run by
``to_onnx``) hold per-element state for every node, gigabytes at export. JAX runs ``jax.jit`` of the
same function on CPU. Prints median latency per
draw, the graph's node count, and the agreement with JAX on the last key: "bitwise", or the share
of equal draws and the largest distance in ulps. Asserts nothing.
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


def _agreement(got: np.ndarray, want: np.ndarray) -> str:
    if np.array_equal(got, want):
        return "bitwise"
    if want.dtype.kind != "f":
        return f"{np.mean(got == want):.2%} equal"
    signed = np.dtype(f"i{want.dtype.itemsize}")
    def ordered(x):  # bit patterns that grow with the value (float32 here: int64 holds the distance)
        i = x.view(signed).astype(np.int64)
        return np.where(i < 0, np.iinfo(signed).min - i, i)
    ulps = np.abs(ordered(got) - ordered(want))
    return f"{np.mean(ulps == 0):.2%} equal, max {ulps.max()} ulp"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0: its default)")
    args = parser.parse_args()

    import onnxruntime as ort
    from jax2onnx import to_onnx

    samplers = {
        "bits (uint32)": lambda key, x: jax.random.bits(key, x.shape),
        "uniform f32": lambda key, x: jax.random.uniform(key, x.shape),
        "normal f32": lambda key, x: jax.random.normal(key, x.shape),
        "exponential f32": lambda key, x: jax.random.exponential(key, x.shape),
    }
    key_spec = jax.ShapeDtypeStruct((2,), jnp.uint32)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = args.threads
    rng = np.random.default_rng(0)
    print(f"{platform.processor() or platform.machine()}, jax {jax.__version__}, onnxruntime {ort.__version__}, "
          f"n = {args.n}, partitionable = {jax.config.jax_threefry_partitionable}\n")
    print("| sampler | nodes | onnxruntime ms | jax.jit ms | ratio | vs JAX |")
    print("|---|---|---|---|---|---|")
    x = np.zeros(args.n, np.float32)
    for name, fn in samplers.items():
        model = to_onnx(fn, [key_spec, ("N",)])
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        key_name, x_name = (i.name for i in sess.get_inputs())
        keys = [rng.integers(0, 2**32, 2, dtype=np.uint64).astype(np.uint32) for _ in range(args.runs + 1)]
        it = iter(keys * 2)
        ours = _median_ms(lambda: sess.run(None, {key_name: next(it), x_name: x}), args.runs)
        jitted = jax.jit(fn)
        jt = iter(keys * 2)
        theirs = _median_ms(lambda: jitted(next(jt), x).block_until_ready(), args.runs)
        key = keys[-1]
        got = sess.run(None, {key_name: key, x_name: x})[0]
        want = np.asarray(jitted(key, x))
        print(f"| {name} | {len(model.graph.node)} | {ours:.2f} | {theirs:.2f} | {ours / theirs:.2f} | "
              f"{_agreement(got, want)} |")


if __name__ == "__main__":
    main()

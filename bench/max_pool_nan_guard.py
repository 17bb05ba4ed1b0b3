"""What max pooling's NaN guard costs in onnxruntime: the same pools exported with
``max_pool_nan_guard=True`` (default: ``MaxPool`` + ``ReduceSum``/``IsNaN``/``If``, a window holding
NaN pools to NaN as in JAX) and ``False`` (the bare ``MaxPool``), run on one thread.

    python bench/max_pool_nan_guard.py [--threads 1] [--runs 200] [--cpu N]

Pools (float32):

- ``nnx.max_pool`` 2×2 stride 2 on (8, 64, 64, 32) channels-last: a lone pool, exported as
  Transpose → MaxPool → Transpose (onnxruntime runs that as its NHWC kernel when nothing sits
  between the Transposes);
- ``lax.reduce_window`` max 2×2 stride 2 and 3×3 stride 2 ``SAME`` on (8, 64, 56, 56)
  channels-first: the layout a pool has between two convolutions once their Transposes cancel;
- ``nnx.Conv`` → ``relu`` → ``max_pool`` → ``nnx.Conv`` on (8, 32, 32, 16): a pool inside a net.

Each model runs on NaN-free random inputs (the guard's ``else`` branch); the guarded models also on
an input holding one NaN (the exact branch). Sessions run interleaved (alternating which goes
first), pinned to ``--cpu`` when given; printed: median and minimum milliseconds of each, and the
guard's cost as a share of the bare model's time, from the minima (on a loaded machine the medians
swing with the load). Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np
import onnxruntime as ort
from flax import nnx
from jax2onnx import to_onnx


def _lax_pool(window: int, padding: str):
    def pool(x):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, window, window), (1, 1, 2, 2), padding)

    return pool


class _ConvPoolConv(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        self.a = nnx.Conv(16, 32, (3, 3), rngs=rngs)
        self.b = nnx.Conv(32, 32, (3, 3), rngs=rngs)

    def __call__(self, x):
        return self.b(nnx.max_pool(jax.nn.relu(self.a(x)), (2, 2), (2, 2)))


def cases() -> list[tuple[str, object, tuple[int, ...]]]:
    return [
        ("nnx.max_pool 2x2 NHWC (8,64,64,32)", lambda x: nnx.max_pool(x, (2, 2), (2, 2)), (8, 64, 64, 32)),
        ("reduce_window 2x2 NCHW (8,64,56,56)", _lax_pool(2, "VALID"), (8, 64, 56, 56)),
        ("reduce_window 3x3 SAME NCHW (8,64,56,56)", _lax_pool(3, "SAME"), (8, 64, 56, 56)),
        ("conv-relu-pool-conv NHWC (8,32,32,16)", _ConvPoolConv(nnx.Rngs(0)), (8, 32, 32, 16)),
    ]


def _session(model, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _ops(model) -> str:
    return " ".join(n.op_type for n in model.graph.node)


def measure(threads: int, runs: int) -> list[dict]:
    rows = []
    rng = np.random.default_rng(0)
    for name, fn, shape in cases():
        spec = jax.ShapeDtypeStruct(shape, jnp.float32)
        guarded, bare = to_onnx(fn, [spec]), to_onnx(fn, [spec], max_pool_nan_guard=False)
        x = rng.standard_normal(shape).astype(np.float32)
        x_nan = x.copy()
        x_nan.reshape(-1)[x.size // 3] = np.nan
        sessions = {"bare": (_session(bare, threads), x), "guard": (_session(guarded, threads), x),
                    "guard, NaN input": (_session(guarded, threads), x_nan)}
        feeds = {k: {s.get_inputs()[0].name: v} for k, (s, v) in sessions.items()}
        times: dict[str, list[float]] = {k: [] for k in sessions}
        for k, (s, _) in sessions.items():  # warm up
            for _ in range(3):
                s.run(None, feeds[k])
        for r in range(runs):
            for k in (list(sessions) if r % 2 else list(reversed(sessions))):
                t = time.perf_counter()
                sessions[k][0].run(None, feeds[k])
                times[k].append(time.perf_counter() - t)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        low = {k: min(v) * 1e3 for k, v in times.items()}
        rows.append({"case": name, "median_ms": med, "min_ms": low, "guard_cost": low["guard"] / low["bare"] - 1,
                     "ops_guard": _ops(guarded), "ops_bare": _ops(bare)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--cpu", type=int, default=None, help="pin the process to this core")
    args = parser.parse_args()
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    print(f"onnxruntime {ort.__version__}, {args.threads} thread(s), {args.runs} interleaved runs, "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    rows = measure(args.threads, args.runs)
    print("| pool | bare MaxPool ms median (min) | guarded ms median (min) | guard cost (of the minima) | guarded, NaN input ms median |")
    print("| --- | --- | --- | --- | --- |")
    for row in rows:
        med, low = row["median_ms"], row["min_ms"]
        print(f"| {row['case']} | {med['bare']:.3f} ({low['bare']:.3f}) | {med['guard']:.3f} ({low['guard']:.3f}) "
              f"| {row['guard_cost']:+.0%} | {med['guard, NaN input']:.3f} |")
    print()
    for row in rows:
        print(f"{row['case']}:\n  guarded: {row['ops_guard']}\n  bare:    {row['ops_bare']}")


if __name__ == "__main__":
    main()

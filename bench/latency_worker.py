"""Latency of one model at a fixed thread count: onnxruntime (each ONNX file given) against JAX-jit.

    python bench/latency_worker.py MODEL THREADS BATCH BUDGET_S MIN_RUNS MAX_RUNS ours=A.onnx peer=B.onnx

A fresh process per thread count, because XLA's CPU thread pool is sized from XLA_FLAGS when jax is
first imported; the process is pinned to THREADS cores, which both runtimes share. onnxruntime gets ``intra_op_num_threads=THREADS`` (one inter-op thread); XLA gets
``intra_op_parallelism_threads=THREADS`` and, at one thread, no multi-threaded Eigen. A side named
``*_nospin`` is onnxruntime with ``session.intra_op.allow_spinning=0`` (a diagnostic: how much of a
multi-threaded run's CPU time is the pool's threads spin-waiting between ops). Same inputs for
all; warmup, then interleaved runs (the order rotates each round) until BUDGET_S seconds have passed
after MIN_RUNS rounds. Per side: median wall-clock µs and median process CPU µs (all threads: the
fair figure on a shared machine, and the one that counts a second thread's work). JAX's output is
blocked on (``block_until_ready``) inside the timed region. Prints one ``BENCH_RESULT`` JSON line.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

MARKER = "BENCH_RESULT "


def main(argv: list[str]) -> int:
    model, threads, batch, budget, min_runs, max_runs = argv[0], int(argv[1]), int(argv[2]), float(argv[3]), int(argv[4]), int(argv[5])
    paths = dict(a.split("=", 1) for a in argv[6:])
    flags = [f"--xla_cpu_multi_thread_eigen={'false' if threads == 1 else 'true'}",
             f"intra_op_parallelism_threads={threads}"]
    os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), *flags]).strip()
    # XLA's flags do not bound every thread it starts (measured: "1 thread" JAX-jit of GPT-2 burnt
    # 1.7 CPU-s per wall-s), so the process is pinned to THREADS cores: both runtimes get the same
    # cores, and wall-clock latency at T threads means T cores.
    cpus = sorted(os.sched_getaffinity(0))[:threads]
    os.sched_setaffinity(0, cpus)

    import jax
    import jax.numpy as jnp
    import onnxruntime as ort

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import models

    spec = models.MODELS[model]
    arrays = models.make_inputs(spec, batch, seed=2)
    runners = {}
    for side, path in paths.items():
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        if side.endswith("_nospin"):
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        feeds = dict(zip([i.name for i in session.get_inputs()], arrays, strict=True))
        runners[side] = (lambda s=session, f=feeds: s.run(None, f))
    with models.x64(spec.double):
        fn = spec.build()
        jitted = jax.jit(lambda *xs: fn(*xs))
        device_args = [jnp.asarray(a) for a in arrays]
        runners["jax"] = lambda: jax.block_until_ready(jitted(*device_args))

        for run in runners.values():
            for _ in range(3):
                run()
        wall: dict[str, list[float]] = {side: [] for side in runners}
        cpu: dict[str, list[float]] = {side: [] for side in runners}
        order = list(runners)
        start = time.perf_counter()
        for i in range(max_runs):
            rot = order[i % len(order):] + order[:i % len(order)]
            for side in rot:
                t0, c0 = time.perf_counter_ns(), time.process_time_ns()
                runners[side]()
                cpu[side].append((time.process_time_ns() - c0) / 1e3)
                wall[side].append((time.perf_counter_ns() - t0) / 1e3)
            if i + 1 >= min_runs and time.perf_counter() - start > budget:
                break
    result = {"ok": True, "threads": threads, "batch": batch, "xla_flags": os.environ["XLA_FLAGS"], "cpus": cpus,
              "latency": {side: {"median_us": statistics.median(wall[side]), "cpu_median_us": statistics.median(cpu[side]),
                                 "min_us": min(wall[side]), "runs": len(wall[side])} for side in runners}}
    print(MARKER + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

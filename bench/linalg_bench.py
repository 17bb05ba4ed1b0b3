"""Linear algebra in onnxruntime vs JAX-jit on the same machine: latency and residual accuracy.

    python bench/linalg_bench.py [--n 64] [--runs 50] [--threads 0]

For ``jnp.linalg.solve`` and ``jnp.linalg.eigh`` (and qr/svd/cholesky) of an n x n matrix, in float32
and float64: the exported model's median onnxruntime latency against ``jax.jit`` (both on CPU), and
the residuals ``||A x - b|| / (||A|| ||x||)``, ``||V diag(w) V^T - A|| / ||A||``, ``||Q R - A|| / ||A||``,
``||U S V^T - A|| / ||A||`` for ours and for JAX's own result, on a well-conditioned and a moderately
ill-conditioned (cond ~1e4 in f32, 1e8 in f64) input. Prints a Markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
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


def _matrix(rng, n, cond, spd):
    q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
    q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    s = np.geomspace(1.0, 1.0 / cond, n)
    return (q1 * s) @ q1.T if spd else (q1 * s) @ q2.T


def _residual(name, a, out):
    nrm = np.linalg.norm(a)
    if name == "solve":
        x, b = out
        return np.linalg.norm(a @ x - b) / (nrm * np.linalg.norm(x))
    if name == "eigh":
        w, v = out
        return np.linalg.norm((v * w) @ v.T - a) / nrm
    if name == "qr":
        q, r = out
        return np.linalg.norm(q @ r - a) / nrm
    if name == "svd":
        u, s, vt = out
        return np.linalg.norm((u * s) @ vt - a) / nrm
    if name == "cholesky":
        (l_,) = out
        return np.linalg.norm(l_ @ l_.T - a) / nrm
    raise ValueError(name)


FUNCS = {
    "solve": (lambda a, b: jnp.linalg.solve(a, b), False),
    "eigh": (lambda a: jnp.linalg.eigh(a), True),
    "qr": (lambda a: jnp.linalg.qr(a), False),
    "svd": (lambda a: jnp.linalg.svd(a, full_matrices=False), False),
    "cholesky": (lambda a: (jnp.linalg.cholesky(a),), True),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=64)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--threads", type=int, default=0, help="onnxruntime intra-op threads (0: its default)")
    ap.add_argument("--funcs", default=",".join(FUNCS))
    args = ap.parse_args()

    import onnxruntime as ort
    from jax2onnx import to_onnx

    rng = np.random.default_rng(0)
    n = args.n
    print(f"n = {n}, jax {jax.__version__}, onnxruntime {ort.__version__}, median of {args.runs} runs\n")
    print("| function | dtype | ORT ms | JAX-jit ms | ratio | residual ours (cond 1 / ill) | residual JAX (cond 1 / ill) |")
    print("|---|---|---|---|---|---|---|")
    for name in args.funcs.split(","):
        fn, spd = FUNCS[name]
        for dtype, ill in ((np.float32, 1e4), (np.float64, 1e8)):
            x64 = dtype == np.float64
            with jax.enable_x64(x64):
                inputs_for = []
                for cond in (1.0, ill):
                    a = _matrix(rng, n, cond, spd).astype(dtype)
                    inputs_for.append([a, rng.standard_normal((n, 1)).astype(dtype)] if name == "solve" else [a])
                specs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in inputs_for[0]]
                model = to_onnx(fn, specs, enable_double_precision=x64)
                so = ort.SessionOptions()
                if args.threads:
                    so.intra_op_num_threads = args.threads
                sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
                feeds = [{i.name: v for i, v in zip(sess.get_inputs(), vals, strict=True)} for vals in inputs_for]
                jitted = jax.jit(fn)
                t_ort = _median_ms(lambda: sess.run(None, feeds[0]), args.runs)
                t_jax = _median_ms(lambda: jax.block_until_ready(jitted(*inputs_for[0])), args.runs)
                res_ours, res_jax = [], []
                for vals, feed in zip(inputs_for, feeds, strict=True):
                    ours = [np.asarray(o, np.float64) for o in sess.run(None, feed)]
                    theirs = [np.asarray(o, np.float64) for o in jax.tree.leaves(jitted(*vals))]
                    a64 = vals[0].astype(np.float64)
                    if name == "solve":
                        ours, theirs = [ours[0], vals[1]], [theirs[0], vals[1]]
                    res_ours.append(_residual(name, a64, ours))
                    res_jax.append(_residual(name, a64, theirs))
            print(f"| {name} | {np.dtype(dtype).name} | {t_ort:.3f} | {t_jax:.3f} | {t_ort / t_jax:.1f}x | "
                  f"{res_ours[0]:.1e} / {res_ours[1]:.1e} | {res_jax[0]:.1e} / {res_jax[1]:.1e} |", flush=True)


if __name__ == "__main__":
    main()

"""Linear algebra in onnxruntime vs JAX-jit on the same machine: latency and residual accuracy.

    python bench/linalg_bench.py [--sizes 8,64,256] [--dtypes float32,float64] [--runs 20] [--threads 0]
                                 [--funcs solve,inv,det,cholesky,qr,eigh,svd] [--save-models DIR]
                                 [--target generic|onnxruntime]
    python bench/linalg_bench.py --ab DIR_BEFORE DIR_AFTER [--runs 20]

``--target`` exports with ``to_onnx(..., target=...)``: under ``onnxruntime`` solve and inv are
onnxruntime's ``com.microsoft.Inverse`` plus one refinement step (jax2onnx_jnp.linalg_inverse),
and a float32 cholesky is recursive halving with Inverse in float64
(jax2onnx_lax.linalg_cholesky_inverse); the other functions are the same graphs on every target.

``--ab`` times the models two ``--save-models`` runs saved (say, one with an older jax2onnx-lax on
``PYTHONPATH``) against each other, interleaved call by call in one process, so that the load of a
shared machine hits both alike; it prints the minimum CPU ms of each and the speedup.

For each function of an n x n matrix: the exported model's onnxruntime latency against ``jax.jit``
(both on CPU, in this one process), and the residuals ``||A x - b|| / (||A|| ||x||)``,
``||A X - I|| / (||A|| ||X||)``, ``|det - det_JAX| / |det_JAX|`` (JAX's own column: 0),
``||L L^T - A|| / ||A||``, ``||Q R - A|| / ||A||``, ``||V diag(w) V^T - A|| / ||A||``,
``||U S V^T - A|| / ||A||`` for ours and for JAX's result, on a random Gaussian matrix (``G``, or
``G G^T + n I`` where the function needs symmetric positive definite input; the latencies are
measured on it: Jacobi's sweep count depends on the spectrum, and an identity-like input would
converge at once) and on a moderately ill-conditioned one (cond ~1e4 in f32, 1e8 in f64). Prints a
Markdown table; asserts nothing.

Timing: both runtimes single-threaded by default (``--threads``; XLA's CPU threads are set through
``XLA_FLAGS`` before JAX starts), each the minimum over ``--runs`` calls, after a warm-up, of the
process CPU time (all threads) and of the wall time. On a shared, loaded machine the CPU time is the
stable figure (a 50 ms call rarely gets a core to itself for its whole duration, so even the wall
minimum carries waiting); the ratio column divides the CPU minima.
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def _threads_from_argv() -> int:
    for i, arg in enumerate(sys.argv):
        if arg == "--threads" and i + 1 < len(sys.argv):
            return int(sys.argv[i + 1])
        if arg.startswith("--threads="):
            return int(arg.split("=", 1)[1])
    return 1


if _threads_from_argv() == 1:  # before JAX starts: XLA reads its flags once
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_cpu_multi_thread_eigen=false "
                               "intra_op_parallelism_threads=1").strip()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


def _min_ms(fn, runs):
    """``(min CPU ms, min wall ms)`` over ``runs`` calls after one warm-up."""
    fn()
    cpu, wall = [], []
    for _ in range(runs):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
    return 1e3 * min(cpu), 1e3 * min(wall)


def _matrix(rng, n, cond, spd):
    if cond is None:  # random: Gaussian, or G G^T + n I
        g = rng.standard_normal((n, n))
        return g @ g.T + n * np.eye(n) if spd else g
    q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
    q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    s = np.geomspace(1.0, 1.0 / cond, n)
    return (q1 * s) @ q1.T if spd else (q1 * s) @ q2.T


def _residual(name, a, out, ref):
    nrm = np.linalg.norm(a)
    if name == "solve":
        x, b = out
        return np.linalg.norm(a @ x - b) / (nrm * np.linalg.norm(x))
    if name == "inv":
        (x,) = out
        return np.linalg.norm(a @ x - np.eye(len(a))) / (nrm * np.linalg.norm(x))
    if name == "det":
        return float(abs(out[0] - ref[0]) / abs(ref[0]))
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


#: name -> (function, symmetric positive definite input)
FUNCS = {
    "solve": (lambda a, b: jnp.linalg.solve(a, b), False),
    "inv": (lambda a: (jnp.linalg.inv(a),), False),
    "det": (lambda a: (jnp.linalg.det(a),), False),
    "cholesky": (lambda a: (jnp.linalg.cholesky(a),), True),
    "qr": (lambda a: jnp.linalg.qr(a), False),
    "eigh": (lambda a: jnp.linalg.eigh(a), True),
    "svd": (lambda a: jnp.linalg.svd(a, full_matrices=False), False),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="8,64", help="comma-separated n (e.g. 8,64,256)")
    ap.add_argument("--dtypes", default="float32", help="float32 and/or float64")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (0: its default); "
                    "1 also makes XLA single-threaded")
    ap.add_argument("--funcs", default=",".join(FUNCS))
    ap.add_argument("--save-models", default=None, help="also save each exported model to this folder")
    ap.add_argument("--ab", nargs=2, default=None, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--target", default="generic", help="to_onnx's target (generic, onnxruntime, ...)")
    args = ap.parse_args()
    if args.ab:
        _ab(*args.ab, args.runs, args.threads)
        return

    import onnxruntime as ort
    from jax2onnx import to_onnx

    rng = np.random.default_rng(0)
    print(f"jax {jax.__version__}, onnxruntime {ort.__version__}, threads {args.threads or 'default'}; "
          f"minimum of {args.runs} runs; target={args.target}; load average {os.getloadavg()[0]:.1f}\n")
    print("| function | n | dtype | nodes | ORT CPU ms | JAX-jit CPU ms | ratio | wall ms ORT / JAX "
          "| residual ours (random / ill) | residual JAX (random / ill) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.funcs.split(","):
        fn, spd = FUNCS[name]
        for n in (int(s) for s in args.sizes.split(",")):
            for dtype in (np.dtype(d) for d in args.dtypes.split(",")):
                x64 = dtype == np.float64
                ill = 1e8 if x64 else 1e4
                with jax.enable_x64(x64):
                    inputs_for = []
                    for cond in (None, ill):
                        a = _matrix(rng, n, cond, spd)
                        if name == "det" and cond is None:  # |det G| ~ sqrt(n!): scaled so it stays finite
                            a = a * np.sqrt(np.e / n)
                        a = a.astype(dtype)
                        inputs_for.append([a, rng.standard_normal((n, 1)).astype(dtype)] if name == "solve" else [a])
                    specs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in inputs_for[0]]
                    model = to_onnx(fn, specs, enable_double_precision=x64, target=args.target)
                    if args.save_models:
                        import onnx

                        os.makedirs(args.save_models, exist_ok=True)
                        onnx.save(model, os.path.join(args.save_models, f"{name}_{n}_{dtype.name}.onnx"))
                    so = ort.SessionOptions()
                    if args.threads:
                        so.intra_op_num_threads = args.threads
                    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
                    feeds = [{i.name: v for i, v in zip(sess.get_inputs(), vals, strict=True)} for vals in inputs_for]
                    jitted = jax.jit(fn)
                    ort_cpu, ort_wall = _min_ms(lambda: sess.run(None, feeds[0]), args.runs)
                    # JAX's minimum needs more calls to settle (its dispatch threads jitter); they are cheap
                    jax_cpu, jax_wall = _min_ms(lambda: jax.block_until_ready(jitted(*inputs_for[0])),
                                                max(args.runs, 30))
                    res_ours, res_jax = [], []
                    for vals, feed in zip(inputs_for, feeds, strict=True):
                        ours = [np.asarray(o, np.float64) for o in sess.run(None, feed)]
                        theirs = [np.asarray(o, np.float64) for o in jax.tree.leaves(jitted(*vals))]
                        a64 = vals[0].astype(np.float64)
                        if name == "solve":
                            ours, theirs = [ours[0], vals[1]], [theirs[0], vals[1]]
                        res_ours.append(_residual(name, a64, ours, theirs))
                        res_jax.append(_residual(name, a64, theirs, theirs))
                print(f"| {name} | {n} | {dtype.name} | {len(model.graph.node)} | {ort_cpu:.3f} | {jax_cpu:.3f} | "
                      f"{ort_cpu / jax_cpu:.1f}x | {ort_wall:.3f} / {jax_wall:.3f} | "
                      f"{res_ours[0]:.1e} / {res_ours[1]:.1e} | {res_jax[0]:.1e} / {res_jax[1]:.1e} |", flush=True)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f}")


def _ab(before: str, after: str, runs: int, threads: int) -> None:
    import onnxruntime as ort

    def session(path):
        so = ort.SessionOptions()
        if threads:
            so.intra_op_num_threads = threads
        return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

    rng = np.random.default_rng(0)
    print(f"onnxruntime {ort.__version__}, threads {threads or 'default'}; min CPU ms of {runs} interleaved runs\n")
    print("| model | nodes before / after | before ms | after ms | speedup |")
    print("|---|---|---|---|---|")
    import onnx

    for fname in sorted(os.listdir(after)):
        if not os.path.exists(os.path.join(before, fname)):
            continue
        name, n, dtype = fname.removesuffix(".onnx").split("_")
        n = int(n)
        a = _matrix(rng, n, None, FUNCS[name][1]) * (np.sqrt(np.e / n) if name == "det" else 1.0)
        vals = [a, rng.standard_normal((n, 1))][: 2 if name == "solve" else 1]
        sessions = [session(os.path.join(d, fname)) for d in (before, after)]
        feeds = [{i.name: v.astype(dtype) for i, v in zip(s.get_inputs(), vals, strict=True)} for s in sessions]
        best = [float("inf"), float("inf")]
        for s, f in zip(sessions, feeds, strict=True):
            s.run(None, f)
        for _ in range(runs):
            for i, (s, f) in enumerate(zip(sessions, feeds, strict=True)):
                c0 = time.process_time()
                s.run(None, f)
                best[i] = min(best[i], time.process_time() - c0)
        nodes = [len(onnx.load(os.path.join(d, fname)).graph.node) for d in (before, after)]
        print(f"| {name} {n} {dtype} | {nodes[0]} / {nodes[1]} | {1e3 * best[0]:.3f} | {1e3 * best[1]:.3f} | "
              f"{best[0] / best[1]:.1f}x |", flush=True)


if __name__ == "__main__":
    main()

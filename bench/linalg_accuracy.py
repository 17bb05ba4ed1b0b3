"""Accuracy of the exported linear algebra against JAX's (LAPACK's) on many matrices: the companion
of bench/linalg_bench.py, whose residual columns see one matrix each.

    python bench/linalg_accuracy.py [--sizes 64,256] [--dtypes float32,float64] [--samples 10]
                                    [--target generic|onnxruntime] [--funcs solve,inv,lu,det,cholesky]

- ``solve``: ``||A x - b|| / (||A|| ||x||)``, median and max over the samples, ours and JAX's, on
  random Gaussian, ill-conditioned (cond 1e4 in f32, 1e8 in f64) and graded (rows and columns
  scaled over 3 (f32) / 6 (f64) decades) matrices.
- ``inv``: ``||A X - I|| / (||A|| ||X||)`` on the same three kinds.
- ``lu``: whether the pivots and the permutation are JAX's, and the backward error
  ``||P A - L U|| / ||A||`` (median, max) on random matrices; the growth of Wilkinson's matrix
  (2^(n-1) under partial pivoting) reported apart.
- ``cholesky``: ``||L L^T - A|| / ||A||`` (median, max) on random (``G G^T + n I``), ill-conditioned
  (cond 1e4 / 1e8) and graded SPD matrices, and in float32 the forward error
  ``||L - L_64|| / ||L_64||`` against numpy's float64 factor of the same (rounded) input.
- ``det``: ``|det - det_f64| / |det_f64|`` against a float64 determinant of the same input: median
  and geometric mean over ``4 x samples`` random matrices scaled to stay finite (a heavy-tailed
  statistic: it needs many samples); float32 only (a float64 input has no more precise reference
  here: np.linalg.det rounds as JAX's LAPACK does).

``--target`` exports with ``to_onnx(..., target=...)`` (``onnxruntime``: solve and inv become
``com.microsoft.Inverse`` plus a refinement step, float32 cholesky recursive halving with
Inverse in float64; lu and det are the same graphs on every target).
Prints Markdown; asserts nothing.
"""

from __future__ import annotations

import argparse

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


def _matrix(rng, n, kind, x64):
    if kind == "random":
        return rng.standard_normal((n, n))
    if kind == "ill":
        q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
        q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
        return (q1 * np.geomspace(1.0, 1e-8 if x64 else 1e-4, n)) @ q2.T
    if kind == "graded":
        d = np.geomspace(1.0, 1e-6 if x64 else 1e-3, n)
        return d[:, None] * rng.standard_normal((n, n)) * d[None, :]
    raise ValueError(kind)


def _session(fn, specs, x64, target="generic"):
    """``fn`` exported and loaded; ``fn`` looks the library function up when called (a reference to
    ``jnp.linalg.solve`` taken before the first export is the unpatched function, which the
    target's fused form never sees)."""
    import onnxruntime as ort
    from jax2onnx import to_onnx

    model = to_onnx(fn, specs, enable_double_precision=x64, target=target)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return lambda *vals: sess.run(None, {i.name: v for i, v in zip(sess.get_inputs(), vals, strict=True)})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64,256")
    ap.add_argument("--dtypes", default="float32,float64")
    ap.add_argument("--samples", type=int, default=10)
    ap.add_argument("--target", default="generic", help="to_onnx's target (generic, onnxruntime, ...)")
    ap.add_argument("--funcs", default="solve,inv,lu,det,cholesky")
    args = ap.parse_args()
    funcs = set(args.funcs.split(","))
    print(f"target={args.target}\n")
    rng = np.random.default_rng(0)
    print("| check | n | dtype | ours | JAX |")
    print("|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        for dtype in (np.dtype(d) for d in args.dtypes.split(",")):
            x64 = dtype == np.float64
            with jax.enable_x64(x64):
                mat = jax.ShapeDtypeStruct((n, n), dtype)
                if "solve" in funcs:
                    _solve_rows(rng, n, dtype, x64, args)
                if "inv" in funcs:
                    _inv_rows(rng, n, dtype, x64, args)
                if "lu" in funcs:
                    _lu_rows(rng, n, dtype, x64, mat, args)
                if "det" in funcs and not x64:  # np.linalg.det in float64 is LAPACK's own float64 rounding: no reference
                    _det_rows(rng, n, dtype, x64, mat, args)
                if "cholesky" in funcs:
                    _cholesky_rows(rng, n, dtype, x64, mat, args)


def _solve_rows(rng, n, dtype, x64, args):
    mat = jax.ShapeDtypeStruct((n, n), dtype)
    solve = _session(lambda a, b: jnp.linalg.solve(a, b), [mat, jax.ShapeDtypeStruct((n, 1), dtype)], x64, args.target)
    jsolve = jax.jit(jnp.linalg.solve)
    for kind in ("random", "ill", "graded"):
        ours, theirs = [], []
        for _ in range(args.samples):
            a = _matrix(rng, n, kind, x64).astype(dtype)
            b = rng.standard_normal((n, 1)).astype(dtype)
            a64 = a.astype(np.float64)

            def residual(x, a64=a64, b=b):
                x = np.asarray(x, np.float64)
                return np.linalg.norm(a64 @ x - b) / (np.linalg.norm(a64) * np.linalg.norm(x))

            ours.append(residual(solve(a, b)[0]))
            theirs.append(residual(jsolve(a, b)))
        print(f"| solve residual {kind} (median / max) | {n} | {dtype.name} | "
              f"{np.median(ours):.2e} / {max(ours):.2e} | {np.median(theirs):.2e} / {max(theirs):.2e} |")



def _inv_rows(rng, n, dtype, x64, args):
    inv = _session(lambda a: jnp.linalg.inv(a), [jax.ShapeDtypeStruct((n, n), dtype)], x64, args.target)
    jinv = jax.jit(jnp.linalg.inv)
    for kind in ("random", "ill", "graded"):
        ours, theirs = [], []
        for _ in range(args.samples):
            a = _matrix(rng, n, kind, x64).astype(dtype)
            a64 = a.astype(np.float64)

            def residual(x, a64=a64):
                x = np.asarray(x, np.float64)
                return np.linalg.norm(a64 @ x - np.eye(n)) / (np.linalg.norm(a64) * np.linalg.norm(x))

            ours.append(residual(inv(a)[0]))
            theirs.append(residual(jinv(a)))
        print(f"| inv residual {kind} (median / max) | {n} | {dtype.name} | "
              f"{np.median(ours):.2e} / {max(ours):.2e} | {np.median(theirs):.2e} / {max(theirs):.2e} |")


def _spd_matrix(rng, n, kind, x64):
    """Symmetric positive definite: ``G G^T + n I`` (random), ``Q diag(s) Q^T`` with s from 1 down to
    1e-4 / 1e-8 (ill), and the random one scaled symmetrically over 3 / 6 decades (graded)."""
    if kind == "ill":
        q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        return (q * np.geomspace(1.0, 1e-8 if x64 else 1e-4, n)) @ q.T
    g = rng.standard_normal((n, n))
    a = g @ g.T + n * np.eye(n)
    if kind == "graded":
        d = np.geomspace(1.0, 1e-6 if x64 else 1e-3, n)
        a = d[:, None] * a * d[None, :]
    return a


def _cholesky_rows(rng, n, dtype, x64, mat, args):
    chol = _session(lambda a: jnp.linalg.cholesky(a), [mat], x64, args.target)
    jchol = jax.jit(jnp.linalg.cholesky)
    for kind in ("random", "ill", "graded"):
        res, fwd = ([], []), ([], [])
        for _ in range(args.samples):
            a = _spd_matrix(rng, n, kind, x64).astype(dtype)
            a64 = a.astype(np.float64)
            ref = np.linalg.cholesky(a64)  # the float64 factor of the rounded input: float32's reference
            for i, l_ in enumerate((chol(a)[0], jchol(a))):
                l_ = np.asarray(l_, np.float64)
                res[i].append(np.linalg.norm(l_ @ l_.T - a64) / np.linalg.norm(a64))
                fwd[i].append(np.linalg.norm(l_ - ref) / np.linalg.norm(ref))
        print(f"| cholesky residual {kind} (median / max) | {n} | {dtype.name} | "
              f"{np.median(res[0]):.2e} / {max(res[0]):.2e} | {np.median(res[1]):.2e} / {max(res[1]):.2e} |")
        if not x64:  # a float64 factor is its own reference's rounding: no forward error to measure
            print(f"| cholesky forward error vs float64 {kind} (median / max) | {n} | {dtype.name} | "
                  f"{np.median(fwd[0]):.2e} / {max(fwd[0]):.2e} | {np.median(fwd[1]):.2e} / {max(fwd[1]):.2e} |",
                  flush=True)


def _lu_rows(rng, n, dtype, x64, mat, args):
    lu = _session(lax.linalg.lu, [mat], x64)
    jlu = jax.jit(lax.linalg.lu)
    same, ours, theirs = 0, [], []

    def backward(a, packed, perm):
        packed = np.asarray(packed, np.float64)
        l_ = np.tril(packed, -1) + np.eye(n)
        return np.linalg.norm(a[np.asarray(perm)] - l_ @ np.triu(packed)) / np.linalg.norm(a)

    for _ in range(args.samples):
        a = rng.standard_normal((n, n)).astype(dtype)
        mine, ref = lu(a), [np.asarray(v) for v in jlu(a)]
        same += bool((mine[1] == ref[1]).all() and (mine[2] == ref[2]).all())
        ours.append(backward(a.astype(np.float64), mine[0], mine[2]))
        theirs.append(backward(a.astype(np.float64), ref[0], ref[2]))
    print(f"| lu pivots as JAX's | {n} | {dtype.name} | {same}/{args.samples} | - |")
    print(f"| lu backward error (median / max) | {n} | {dtype.name} | "
          f"{np.median(ours):.2e} / {max(ours):.2e} | {np.median(theirs):.2e} / {max(theirs):.2e} |")
    wilkinson = (np.eye(n) - np.tril(np.ones((n, n)), -1))
    wilkinson[:, -1] = 1.0
    w = wilkinson.astype(dtype)
    mine, ref = lu(w), [np.asarray(v) for v in jlu(w)]
    growth = [float(np.max(np.abs(np.triu(np.asarray(x, np.float64))))) for x in (mine[0], ref[0])]
    print(f"| lu growth, Wilkinson's matrix (max abs U) | {n} | {dtype.name} | {growth[0]:.3g} | "
          f"{growth[1]:.3g} |")



def _det_rows(rng, n, dtype, x64, mat, args):
    det = _session(lambda a: jnp.linalg.det(a), [mat], x64)
    jdet = jax.jit(jnp.linalg.det)
    ours, theirs = [], []
    for _ in range(4 * args.samples):
        a = (rng.standard_normal((n, n)) * np.sqrt(np.e / n)).astype(dtype)
        ref = np.linalg.det(a.astype(np.float64))
        ours.append(abs(float(det(a)[0]) - ref) / abs(ref))
        theirs.append(abs(float(jdet(a)) - ref) / abs(ref))
    gm = [float(np.exp(np.mean(np.log(np.maximum(v, 1e-300))))) for v in (ours, theirs)]
    print(f"| det relative error (median / geomean, {4 * args.samples} matrices) | {n} | {dtype.name} | "
          f"{np.median(ours):.2e} / {gm[0]:.2e} | {np.median(theirs):.2e} / {gm[1]:.2e} |", flush=True)


if __name__ == "__main__":
    main()

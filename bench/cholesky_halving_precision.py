"""Why jax2onnx_lax.linalg_cholesky_inverse computes in float64: the same algorithm (32-column block
LDL^T panel steps with explicit pivot-block inverses, then recursive halving of the pivot blocks,
the factor assembled bottom-up) emulated in numpy with float32 and with float64 arithmetic inside,
on float32 SPD input; residual ``||L L^T - A|| / ||A||`` (median of 5) against JAX's float32 potrf.

    python bench/cholesky_halving_precision.py [--sizes 64,256] [--samples 5]

Prints a Markdown table; asserts nothing. (The exported graph's own figures:
bench/linalg_accuracy.py --funcs cholesky --target onnxruntime.)
"""

from __future__ import annotations

import argparse

import jax.numpy as jnp
import numpy as np

PANEL = 32


def _halving(x, dtype):
    """Lower factors of the SPD blocks ``x`` [B, h, h] (h a power of two), arithmetic in ``dtype``."""
    factors, h = [], x.shape[-1]
    while h > 1:
        k = h // 2
        a11, a12, a21, a22 = x[:, :k, :k], x[:, :k, k:], x[:, k:, :k], x[:, k:, k:]
        lt21 = (a21 @ np.linalg.inv(a11)).astype(dtype)
        factors.append(lt21)
        x = np.concatenate([a11, (a22 - lt21 @ a12).astype(dtype)], axis=1).reshape(-1, k, k)
        h = k
    l_ = np.sqrt(x)
    for lt21 in reversed(factors):
        k = lt21.shape[-1]
        pair = l_.reshape(-1, 2 * k, k)
        l1, l2 = pair[:, :k], pair[:, k:]
        l_ = np.concatenate([np.concatenate([l1, np.zeros_like(l1)], -1), np.concatenate([lt21 @ l1, l2], -1)], 1)
    return l_


def cholesky(a, dtype):
    """The lowering's algorithm on ``a`` (n a power of two, a multiple of PANEL), inside ``dtype``."""
    n = len(a)
    t, pivots, lts = a.astype(dtype), [], []
    for _ in range(0, n - PANEL, PANEL):
        d, t12, t21, t22 = t[:PANEL, :PANEL], t[:PANEL, PANEL:], t[PANEL:, :PANEL], t[PANEL:, PANEL:]
        lt = (t21 @ np.linalg.inv(d)).astype(dtype)
        t = (t22 - lt @ t12).astype(dtype)
        pivots.append(d)
        lts.append(lt)
    pivots.append(t)
    blocks = _halving(np.stack(pivots), dtype)
    l_ = np.zeros((n, n), dtype)
    for j, lj in enumerate(blocks):
        l_[j * PANEL:(j + 1) * PANEL, j * PANEL:(j + 1) * PANEL] = lj
        if j < len(lts):
            l_[(j + 1) * PANEL:, j * PANEL:(j + 1) * PANEL] = lts[j] @ lj
    return l_.astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64,256")
    ap.add_argument("--samples", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)

    def spd(n, cond):
        if cond is None:
            g = rng.standard_normal((n, n))
            return g @ g.T + n * np.eye(n)
        q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        return (q * np.geomspace(1.0, 1.0 / cond, n)) @ q.T

    def residual(l_, a64):
        l_ = l_.astype(np.float64)
        return np.linalg.norm(l_ @ l_.T - a64) / np.linalg.norm(a64)

    print("| n | cond | internal float32 | internal float64 | JAX float32 |")
    print("|---|---|---|---|---|")
    for n in (int(s) for s in args.sizes.split(",")):
        for cond in (None, 1e4, 1e6):
            res = [[], [], []]
            for _ in range(args.samples):
                a = spd(n, cond).astype(np.float32)
                a64 = a.astype(np.float64)
                res[0].append(residual(cholesky(a, np.float32), a64))
                res[1].append(residual(cholesky(a, np.float64), a64))
                res[2].append(residual(np.asarray(jnp.linalg.cholesky(a)), a64))
            label = "random" if cond is None else f"{cond:.0e}".replace("e+0", "e")
            print(f"| {n} | {label} | " + " | ".join(f"{np.median(r):.1e}" for r in res) + " |", flush=True)


if __name__ == "__main__":
    main()

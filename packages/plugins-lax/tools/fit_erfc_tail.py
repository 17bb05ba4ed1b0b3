"""Derive the constants of the float32 erfc tail in ``jax2onnx.forms`` (core).

    python packages/plugins-lax/tools/fit_erfc_tail.py

erfc(x) * exp(x^2) on [1, 9.3] (below 1 the lowering uses 1 - Erf(x); above 9.3 float32 erfc is
subnormal and XLA flushes it to 0) is fitted by a rational P3(x)/Q3(x) minimising the maximal
relative error (iteratively reweighted least squares against mpmath), then written as the continued
fraction

    c0 + a1 / (x + b1 + a2 / (x + b2 + a3 / (x + b3)))

which costs 9 ONNX nodes (Horner's P/Q would cost 12) and has no inf/inf at x = inf. Prints the
constants and the fit's max relative error. Needs mpmath.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np

mp.mp.dps = 30
LO, HI = 1.0, 9.3


def target(xs: np.ndarray) -> np.ndarray:
    return np.array([float(mp.erfc(x) * mp.exp(x * x)) for x in xs])


def fit_rational(xs, g, k, m, rounds=40):
    """P (degree k) / Q (degree m, Q(0) = 1) with minimal max relative error on xs."""
    w = np.ones_like(xs)
    best = None
    for _ in range(rounds):
        a = np.hstack([xs[:, None] ** np.arange(k + 1), -g[:, None] * xs[:, None] ** np.arange(1, m + 1)])
        sol, *_ = np.linalg.lstsq(a * (w / g)[:, None], w, rcond=None)
        p, q = sol[: k + 1], np.concatenate([[1.0], sol[k + 1 :]])
        rel = np.abs(np.polyval(p[::-1], xs) / np.polyval(q[::-1], xs) / g - 1)
        if best is None or rel.max() < best[0]:
            best = (rel.max(), p, q)
        w = w * np.sqrt(rel / rel.mean()) + 1e-30
        w /= w.mean()
    return best


def continued_fraction(p, q):
    """P/Q (both degree 3, coefficients lowest first) as (c0, [a1, a2, a3], [b1, b2, b3])."""
    p, q = np.asarray(p[::-1]), np.asarray(q[::-1])  # highest first, numpy's polynomial order
    c0 = p[0] / q[0]
    num, den = np.polysub(p, c0 * q)[1:], q  # P/Q = c0 + num/den
    a, b = [], []
    for _ in range(3):
        # den/num = alpha x + beta + rem/num, so num/den = (1/alpha) / (x + beta/alpha + (rem/alpha)/num)
        (alpha, beta), rem = np.polydiv(den, num)
        a.append(1 / alpha)
        b.append(beta / alpha)
        num, den = rem / alpha, num
    return c0, a, b


def evaluate(c0, a, b, x):
    t = x + b[2]
    t = x + b[1] + a[2] / t
    t = x + b[0] + a[1] / t
    return c0 + a[0] / t


def main() -> None:
    xs = np.linspace(LO, HI, 4000)
    g = target(xs)
    err, p, q = fit_rational(xs, g, 3, 3)
    c0, a, b = continued_fraction(p, q)
    cf = evaluate(c0, a, b, xs)
    print(f"rational (3, 3): max relative error {err:.3g}; continued fraction: {np.abs(cf / g - 1).max():.3g}")
    x32 = xs.astype(np.float32)
    f32 = evaluate(*(np.float32(c0), [np.float32(v) for v in a], [np.float32(v) for v in b]), x32)
    print(f"evaluated in float32: {np.abs(f32.astype(np.float64) / target(x32.astype(np.float64)) - 1).max():.3g}")
    print(f"_TAIL_C0 = {c0!r}")
    print(f"_TAIL_A = {tuple(float(v) for v in a)!r}")
    print(f"_TAIL_B = {tuple(float(v) for v in b)!r}")


if __name__ == "__main__":
    main()

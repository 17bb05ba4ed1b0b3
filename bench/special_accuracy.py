"""Special functions against mpmath: the exported model's max relative error next to JAX's own.

    python bench/special_accuracy.py [lgamma digamma bessel_i1e bessel_i0e zeta polygamma1 gammainc betainc]

Needs mpmath (pip install mpmath). For each function and dtype: the max relative error over a grid
of its domain (points where the reference is 0 or not finite are skipped) of onnxruntime running
the export, and of JAX itself. Prints one line per function; asserts nothing.
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import mpmath as mp
import numpy as np
import onnxruntime as ort
from jax import lax
from jax2onnx import to_onnx

mp.mp.dps = 40


def _run_onnx(fn, args):
    double = args[0].dtype == np.float64
    with jax.enable_x64(double):
        model = to_onnx(fn, [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args], enable_double_precision=double)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {i.name: a for i, a in zip(sess.get_inputs(), args, strict=True)})[0]


def _run_jax(fn, args):
    with jax.enable_x64(args[0].dtype == np.float64):
        return np.asarray(fn(*[jnp.asarray(x) for x in args]))


def _max_rel(values, ref):
    values = np.asarray(values, np.float64)
    ok = np.isfinite(ref) & (ref != 0)
    return float(np.max(np.abs(values[ok] - ref[ok]) / np.abs(ref[ok])))


def _lgamma_ref(x):
    return mp.loggamma(x).real if x > 0 else mp.log(abs(mp.gamma(x)))


_NEG = -np.geomspace(1e-3, 50, 200) + 0.013
CASES = {
    "lgamma": (lax.lgamma, [np.concatenate([np.geomspace(1e-3, 1e3, 300), _NEG])], _lgamma_ref),
    "digamma": (lax.digamma, [np.concatenate([np.geomspace(1e-3, 1e4, 300), _NEG])], mp.digamma),
    "bessel_i1e": (jsp.i1e, [np.geomspace(1e-4, 1e3, 400)], lambda x: mp.besseli(1, x) * mp.exp(-x)),
    "bessel_i0e": (jsp.i0e, [np.geomspace(1e-4, 1e3, 400)], lambda x: mp.besseli(0, x) * mp.exp(-x)),
    "zeta": (jsp.zeta, [np.linspace(1.1, 12, 200), np.geomspace(0.05, 30, 200)], mp.zeta),
    "polygamma1": (lambda x: jsp.polygamma(1, x), [np.geomspace(0.05, 30, 200)], lambda x: mp.polygamma(1, x)),
    "gammainc": (jsp.gammainc, [np.geomspace(0.05, 50, 200), np.geomspace(0.01, 60, 200)[::-1]],
                 lambda a, x: mp.gammainc(a, 0, x, regularized=True)),
    "betainc": (jsp.betainc, [np.geomspace(0.2, 10, 150), np.geomspace(0.2, 10, 150)[::-1], np.linspace(0.01, 0.99, 150)],
                lambda a, b, x: mp.betainc(a, b, 0, x, regularized=True)),
}


def main() -> None:
    for name in sys.argv[1:] or CASES:
        fn, grid, ref_fn = CASES[name]
        row = [name]
        for dtype in (np.float32, np.float64):
            args = [g.astype(dtype) for g in grid]  # the reference at the rounded inputs
            ref = np.array([float(ref_fn(*[mp.mpf(float(v)) for v in vals])) for vals in zip(*args, strict=True)])
            ours, theirs = _run_onnx(fn, args), _run_jax(fn, args)
            row.append(f"{np.dtype(dtype).name}: ours {_max_rel(ours, ref):.1e} jax {_max_rel(theirs, ref):.1e}")
        print(" | ".join(row), flush=True)


if __name__ == "__main__":
    main()

"""How far an accelerator's float32 is from float64: matmuls at each ``default_matmul_precision``,
the elementwise functions models use, and the accelerator test's ``tanh(x @ w) @ w.T``.

    python bench/accelerator_precision.py          # on a TPU/GPU host (prints; nothing asserted)

Run on a TPU v5e (issue #34): bench/results/accelerator_tpu.md. Its figures set
``jax2onnx.verification.reference.TPU_FLOAT32_TOLERANCES``.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
import scipy.special as sp


def relative(out, ref) -> float:
    return float(np.abs(np.asarray(out, np.float64) - ref).max() / np.abs(ref).max())


def matmuls(rng) -> None:
    a = rng.standard_normal((64, 256)).astype(np.float32)
    b = rng.standard_normal((256, 128)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for precision in (None, "high", "highest", "float32"):
        scope = jax.default_matmul_precision(precision) if precision else contextlib.nullcontext()
        with scope:
            jitted = jax.jit(lambda a, b: a @ b)(a, b)
            eager = jnp.dot(a, b)
        print("matmul", precision, "jit", relative(jitted, ref), "eager", relative(eager, ref))
    print("explicit HIGHEST", relative(jnp.dot(a, b, precision=jax.lax.Precision.HIGHEST), ref))


def elementwise() -> None:
    x = np.linspace(-6, 6, 20001).astype(np.float32)
    positive = np.linspace(0.01, 50, 20001).astype(np.float32)
    functions = {
        "exp": (jnp.exp, np.exp, x), "tanh": (jnp.tanh, np.tanh, x), "log": (jnp.log, np.log, positive),
        "rsqrt": (jax.lax.rsqrt, lambda v: 1 / np.sqrt(v), positive), "sqrt": (jnp.sqrt, np.sqrt, positive),
        "erf": (jax.scipy.special.erf, sp.erf, x), "logistic": (jax.nn.sigmoid, sp.expit, x),
        "div": (lambda v: 1.0 / v, lambda v: 1.0 / v, positive), "log1p": (jnp.log1p, np.log1p, positive),
        "gelu": (lambda v: jax.nn.gelu(v, approximate=False), lambda v: v * 0.5 * (1 + sp.erf(v / np.sqrt(2))), x),
    }
    for name, (f, exact, v) in functions.items():
        out = np.asarray(jax.jit(f)(v), np.float64)
        ref = exact(v.astype(np.float64))
        ulps = np.abs(out - ref) / np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64)
        rel = np.max(np.abs(out - ref) / np.maximum(np.abs(ref), 1e-30))
        print(f"{name}: max rel {rel:.3g} max ulps {ulps.max():.3g}")


def the_test_function(rng) -> None:
    w = rng.standard_normal((8, 8)).astype(np.float32)
    x = rng.standard_normal((5, 8)).astype(np.float32)
    fn = jax.jit(lambda x: jnp.tanh(x @ w) @ w.T)
    ref = np.tanh(x.astype(np.float64) @ w) @ w.T.astype(np.float64)
    with jax.default_matmul_precision("highest"):
        print("test fn at highest", np.abs(np.asarray(fn(x)) - ref).max())
    print("test fn default", np.abs(np.asarray(fn(x)) - ref).max())


if __name__ == "__main__":
    print(jax.devices())
    generator = np.random.default_rng(0)
    matmuls(generator)
    elementwise()
    the_test_function(generator)

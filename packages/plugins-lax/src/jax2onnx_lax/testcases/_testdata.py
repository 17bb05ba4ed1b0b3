"""Input specs and generators for testcases whose primitive needs a domain (``(rng, shape, dtype) -> array``).

The runner casts the result to the spec's dtype, so one generator serves float32 and float64.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def spec(*shape: Any, dtype: Any = jnp.int32) -> jax.ShapeDtypeStruct:
    """An input spec (int32 unless ``dtype`` says otherwise): ``spec("B", 4)``."""
    return jax.ShapeDtypeStruct(shape, dtype)


def uniform(lo: float, hi: float):
    def gen(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return rng.uniform(lo, hi, size=shape)

    return gen


def ints(lo: int, hi: int):
    """Integers in ``[lo, hi)`` (negative ones included, unlike the runner's default ``[0, 5)``)."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        return rng.integers(lo, hi, size=shape)

    return gen


def log_scale(lo_exp: float, hi_exp: float, *, signed: bool = True):
    """Magnitudes spread over ``10**lo_exp .. 10**hi_exp``: catches formulas that cancel (``exp(x)-1``)."""

    def gen(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        mag = 10.0 ** rng.uniform(lo_exp, hi_exp, size=shape)
        return mag * (rng.choice([-1.0, 1.0], size=shape) if signed else 1.0)

    return gen


def halves(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Multiples of 0.5 in [-4, 4]: exact ties for rounding."""
    return rng.integers(-8, 9, size=shape) / 2.0


def f32(*values: float) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


#: Values where elementwise functions have edge cases (f32 so the f64 variant widens them).
SPECIAL = f32(0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 1e-30, -1e-30, 3e38, -3e38, np.inf, -np.inf, np.nan)

"""Helpers for the pack's testcases: build modules with parameters that make a test able to fail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from flax import nnx


def randomized(module: Any, seed: int = 0, low: float = 0.5, high: float = 1.5) -> Any:
    """``module`` with every Param and BatchStat drawn from U(low, high).

    Fresh modules have zero biases, unit scales, zero means and unit variances, under which a
    lowering that drops a bias or swaps mean and variance would still pass; positive values keep
    variances valid.
    """
    rng = np.random.default_rng(seed)
    state = nnx.state(module, (nnx.Param, nnx.BatchStat))
    new = jax.tree_util.tree_map(lambda a: rng.uniform(low, high, np.shape(a)).astype(np.asarray(a).dtype), state)
    nnx.update(module, new)
    return module


def model(build: Callable[[], Any], *, eval_mode: bool = False, seed: int | None = 0, low: float = 0.5,
          high: float = 1.5) -> Callable[[], Any]:
    """A testcase factory: ``build()``, with parameters drawn from U(low, high), optionally in eval mode."""

    def factory() -> Any:
        m = build()
        if seed is not None:
            randomized(m, seed, low, high)
        if eval_mode:
            m.eval()
        return m

    return factory

"""Helpers for the pack's testcases: Equinox modules with weights that make a test able to fail."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np


def randomized(module: Any, seed: int = 0, low: float = -1.0, high: float = 1.0) -> Any:
    """``module`` with every floating array drawn from U(low, high): fresh modules have zero
    biases and unit scales, under which a lowering that drops a bias would still pass."""
    rng = np.random.default_rng(seed)
    arrays, rest = eqx.partition(module, eqx.is_inexact_array)
    arrays = jax.tree_util.tree_map(
        lambda a: jnp.asarray(rng.uniform(low, high, np.shape(a)).astype(np.asarray(a).dtype)), arrays)
    return eqx.combine(arrays, rest)


def model(build: Callable[[jax.Array], Any], *, seed: int | None = 0, low: float = -1.0, high: float = 1.0,
          wrap: Callable[[Any], Any] | None = None) -> Callable[[], Any]:
    """A testcase factory: ``build(key)`` with randomised weights, optionally wrapped
    (``jax.vmap``, ``eqx.filter_jit``, a closure passing ``inference=True``)."""

    def factory() -> Any:
        m = build(jax.random.key(0))
        if seed is not None:
            m = randomized(m, seed, low, high)
        return wrap(m) if wrap is not None else m

    return factory


def float32_ops(*ops: str, forbids: tuple[str, ...] = (), max_nodes: int | None = None) -> Callable[[Any, Any], None]:
    """A testcase ``check``: ``ops`` appear (and ``forbids`` do not) in the float32 export; the
    float64 export may differ where onnxruntime lacks a double kernel and the lowering declines."""

    def check(proto: Any, variant: Any) -> None:
        from jax2onnx.ir.legalize import decomposed_ops
        from jax2onnx.ir.opsets import op_since
        from jax2onnx.testing.runner import op_types

        # The float64 export, and one at an opset older than an expected op, take decompositions:
        # the fused form this check describes is the float32 one at a recent opset.
        if variant.double or any((op_since(o) or 0) > (variant.opset or 10**6) for o in ops):
            return
        found = op_types(proto)
        missing = [o for o in ops if o not in found]
        assert not missing, f"expected {missing} in the float32 graph, found {sorted(found)}"
        present = [o for o in forbids if o in found]
        assert not present, f"{present} should have been fused away in the float32 graph, found {sorted(found)}"
        # the budget counts the newest form: an op rewritten for an older opset adds nodes
        if max_nodes is not None and not decomposed_ops(proto):
            assert len(proto.graph.node) <= max_nodes, f"{len(proto.graph.node)} nodes > budget {max_nodes}"

    return check


def vmapped(m: Any) -> Callable[..., Any]:
    """``jax.vmap(m)`` called inside the exported function, as equinox model code calls it (a
    ``jax.vmap(m)`` made before the export is JAX's own and batches equinox's per-example math)."""
    return lambda *xs: jax.vmap(m)(*xs)

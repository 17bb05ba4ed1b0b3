"""Helpers for the pack's testcases: Linen models bound to variables that make a test able to fail."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from jax2onnx.testing import assert_within_budget


def randomized(variables: Any, seed: int = 0, low: float = 0.5, high: float = 1.5) -> Any:
    """``variables`` with every leaf drawn from U(low, high).

    Fresh variables have zero biases, unit scales, zero means and unit variances, under which a
    lowering that drops a bias or swaps mean and variance would still pass; positive values keep
    variances valid.
    """
    rng = np.random.default_rng(seed)
    return jax.tree_util.tree_map(lambda a: rng.uniform(low, high, np.shape(a)).astype(np.asarray(a).dtype), variables)


def init_variables(module: Any, *example_shapes: Sequence[int], seed: int | None = 0, low: float = 0.5,
                   high: float = 1.5, **init_kwargs: Any) -> Any:
    """``module.init`` on zeros of ``example_shapes`` (float32 for a shape, the dtype of a
    ``jax.ShapeDtypeStruct``), then randomised (unless seed is None)."""
    import jax.numpy as jnp

    xs = [jnp.zeros(s.shape, s.dtype) if hasattr(s, "dtype") else jnp.zeros(s, jnp.float32) for s in example_shapes]
    variables = module.init(jax.random.key(0), *xs, **init_kwargs)
    return variables if seed is None else randomized(variables, seed, low, high)


def applied(build: Callable[[], Any], *example_shapes: Sequence[int], seed: int | None = 0, low: float = 0.5,
            high: float = 1.5, init_kwargs: dict[str, Any] | None = None, **apply_kwargs: Any) -> Callable[[], Any]:
    """A testcase factory: ``functools.partial(model.apply, variables, **apply_kwargs)``, the
    documented way to export a Linen model."""

    def factory() -> Any:
        m = build()
        variables = init_variables(m, *example_shapes, seed=seed, low=low, high=high, **(init_kwargs or {}))
        return functools.partial(m.apply, variables, **apply_kwargs)

    return factory


def bound(build: Callable[[], Any], *example_shapes: Sequence[int], seed: int | None = 0, low: float = 0.5,
          high: float = 1.5) -> Callable[[], Any]:
    """A testcase factory: the module bound to its variables (``model.bind(variables)``), the other
    documented input."""

    def factory() -> Any:
        m = build()
        return m.bind(init_variables(m, *example_shapes, seed=seed, low=low, high=high))

    return factory


def float32_ops(*ops: str, forbids: tuple[str, ...] = (), max_transposes: int | None = None,
                max_nodes: int | None = None) -> Callable[[Any, Any], None]:
    """A testcase ``check``: ``ops`` appear in the float32 export (the float64 export may differ,
    since onnxruntime lacks double kernels for some ops and the lowering then declines)."""

    def check(proto: Any, variant: Any) -> None:
        from jax2onnx.ir.opsets import op_since
        from jax2onnx.testing.runner import op_types, unavailable_ops

        # The float64 export, and one at an opset older than an expected op, take decompositions:
        # the fused form this check describes is the float32 one at a recent opset.
        if variant.double or any((op_since(o) or 0) > (variant.opset or 10**6) for o in ops):
            return
        found = op_types(proto)
        decomposed = unavailable_ops(proto, ops)  # e.g. Gelu at opset 17: the module's own arithmetic
        missing = [o for o in ops if o not in found] if not decomposed else []
        assert not missing, f"expected {missing} in the float32 graph, found {sorted(found)}"
        if decomposed:  # the budgets below describe the fused graph
            return
        present = [o for o in forbids if o in found]
        assert not present, f"{present} should have been fused away in the float32 graph, found {sorted(found)}"
        assert_within_budget(proto, max_nodes=max_nodes, max_transposes=max_transposes)

    return check


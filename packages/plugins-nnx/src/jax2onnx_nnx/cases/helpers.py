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


def float32_ops(*ops: str, max_transposes: int | None = None, max_nodes: int | None = None) -> Callable[[Any], None]:
    """A testcase ``check``: ``ops`` appear in the float32 export. The float64 export may differ,
    since onnxruntime lacks double kernels for some ops (Conv, ConvTranspose, AveragePool) and the
    lowering then declines in favour of the lax pack's exact float64 decomposition."""

    def check(proto: Any) -> None:
        from jax2onnx.testing.runner import op_types, unavailable_ops

        if proto.graph.input[0].type.tensor_type.elem_type == 11:  # float64
            return
        found = op_types(proto)
        decomposed = unavailable_ops(proto, ops)  # e.g. Gelu at opset 17: the module's own arithmetic
        missing = [o for o in ops if o not in found and o not in decomposed]
        assert not missing, f"expected {missing} in the float32 graph, found {sorted(found)}"
        if decomposed:  # the budgets below describe the fused graph
            return
        if max_transposes is not None:
            n = sum(1 for node in proto.graph.node if node.op_type == "Transpose")
            assert n <= max_transposes, f"{n} Transposes, expected at most {max_transposes}"
        if max_nodes is not None:
            assert len(proto.graph.node) <= max_nodes, f"{len(proto.graph.node)} nodes > budget {max_nodes}"

    return check


def param_dtype() -> Any:
    """float64 parameters under a float64 export, float32 otherwise (call inside the factory)."""
    import jax.numpy as jnp

    return jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32

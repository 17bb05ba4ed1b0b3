"""Pieces of testcase checks and factories that more than one pack needs."""

from __future__ import annotations

from typing import Any

import jax
import onnx


def assert_within_budget(proto: onnx.ModelProto, *, max_nodes: int | None = None,
                         max_transposes: int | None = None, label: str = "") -> None:
    """The main graph has at most ``max_transposes`` Transpose nodes and ``max_nodes`` nodes (None:
    no limit): a ``check``'s guard that a fusion still happens. ``label`` starts the message."""
    prefix = f"{label}: " if label else ""
    nodes = proto.graph.node
    if max_transposes is not None:
        n = sum(1 for node in nodes if node.op_type == "Transpose")
        assert n <= max_transposes, f"{prefix}{n} Transposes, expected at most {max_transposes}"
    if max_nodes is not None:
        assert len(nodes) <= max_nodes, f"{prefix}{len(nodes)} nodes > budget {max_nodes}"


def param_dtype() -> Any:
    """float64 parameters under a float64 export, float32 otherwise (call inside the factory): for
    modules whose output takes the parameters' dtype (an embedding lookup)."""
    import jax.numpy as jnp

    return jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32

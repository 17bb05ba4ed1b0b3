"""jax2onnx.testing's shared check pieces: the graph budget fails when a graph is over it."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest
from jax2onnx.compat import x64_enabled
from jax2onnx.testing import assert_within_budget, param_dtype
from onnx import helper


def _graph(*ops: str):
    nodes = [helper.make_node(op, [f"v{i}"], [f"v{i + 1}"]) for i, op in enumerate(ops)]
    return helper.make_model(helper.make_graph(nodes, "g", [], []))


def test_budget_counts_nodes_and_transposes():
    proto = _graph("Transpose", "Relu", "Transpose")
    assert_within_budget(proto, max_nodes=3, max_transposes=2)
    assert_within_budget(proto)  # no limits: nothing to exceed
    with pytest.raises(AssertionError, match=r"^case_a: 2 Transposes, expected at most 1"):
        assert_within_budget(proto, max_transposes=1, label="case_a")
    with pytest.raises(AssertionError, match=r"^3 nodes > budget 2"):
        assert_within_budget(proto, max_nodes=2)


def test_param_dtype_follows_x64():
    assert param_dtype() == (jnp.float64 if jax.config.read("jax_enable_x64") else jnp.float32)
    with x64_enabled(True):
        assert param_dtype() == jnp.float64
    with x64_enabled(False):
        assert param_dtype() == jnp.float32

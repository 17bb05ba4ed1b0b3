"""Testcases of the ``Mish`` fusion (:mod:`jax2onnx_mypack.mish`): data the pytest plugin turns into tests."""

from __future__ import annotations

import jax
from jax2onnx.testing import Component, Testcase

from .. import example_library as lib


def _one_node_in_float32(model, variant):
    """float32: the whole call is one Mish node. float64: declined, so the body and no Mish."""
    ops = [n.op_type for n in model.graph.node]
    if variant.double:
        assert "Mish" not in ops, ops
    elif variant.opset is None or variant.opset >= 18:  # Mish exists from opset 18
        assert ops == ["Mish"], ops


def _wide(rng, shape, dtype):
    """Values across [-6, 6], both tails of the curve."""
    return rng.uniform(-6.0, 6.0, size=shape).astype(dtype)


components = [
    Component(
        name="mypack.mish",
        onnx=["Mish"],
        since="v0.1.0",
        description="example_library.mish fused into one Mish node (its body where Mish cannot be used)",
        testcases=[
            Testcase("mish", lambda x: lib.mish(x), [("B", 6)], input_generator=_wide,
                     expected_ops=["Mish"], expected_ops_f64=(), check=_one_node_in_float32),
            # Under vmap the call's equations are mish's at the batched shape (it is elementwise):
            # core's retrace confirms it, and the batched call is one Mish node too.
            Testcase("mish_under_vmap", lambda x: jax.vmap(lib.mish)(x), [("B", 6)], input_generator=_wide,
                     expected_ops=["Mish"], expected_ops_f64=(), check=_one_node_in_float32),
        ],
    ),
]

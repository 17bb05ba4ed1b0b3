"""Testcases of :mod:`jax2onnx_jnp.pad` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jax2onnx.testing import Component, Testcase

from .helpers import grad_of_sum


def _reflect(x):
    return jnp.pad(x, ((0, 0), (2, 1)), mode="reflect")


def _pad_mode(mode):
    """A ``check``: the graph has one Pad, in ``mode`` (in every variant)."""

    def check(model, variant):
        import onnx

        modes = [
            onnx.helper.get_attribute_value(a).decode()
            for n in model.graph.node
            if n.op_type == "Pad"
            for a in n.attribute
            if a.name == "mode"
        ]
        assert modes == [mode], f"{variant.id}: Pad modes {modes}, expected [{mode!r}]"

    return check


components = [
    Component(name="jnp.pad", onnx=["Pad"], since="v0.7.0", testcases=[
        Testcase("pad_constant", lambda x: jnp.pad(x, ((1, 2), (0, 3))), [("B", 4)], expected_ops=["Pad"],
                 forbidden_ops=["Concat"]),
        Testcase("pad_constant_value", lambda x: jnp.pad(x, 1, constant_values=-2.5), [("B", 3)],
                 expected_ops=["Pad"]),
        # Static shapes: JAX 0.6 refuses reflect padding on an array with any symbolic axis.
        Testcase("pad_reflect", _reflect, [(3, 4)], expected_ops=["Pad"], forbidden_ops=["Concat"],
                 check=_pad_mode("reflect")),
        Testcase("pad_edge", lambda x: jnp.pad(x, ((2, 0), (1, 5)), mode="edge"), [("B", 3)], expected_ops=["Pad"],
                 forbidden_ops=["Concat"], check=_pad_mode("edge")),
        Testcase("pad_wrap", lambda x: jnp.pad(x, ((0, 0), (3, 5)), mode="wrap"), [("B", 3)], expected_ops=["Pad"],
                 forbidden_ops=["Concat"], check=_pad_mode("wrap")),
        Testcase("pad_reflect_int", lambda x: jnp.pad(x, (1, 2), mode="reflect"),
                 [jax.ShapeDtypeStruct((5,), jnp.int32)], expected_ops=["Pad"]),
        Testcase("pad_reflect_wide", lambda x: jnp.pad(x, (0, 7), mode="reflect"), [(3,)],
                 description="wider than the axis: JAX reflects repeatedly, onnxruntime refuses; lax path"),
        Testcase("pad_symmetric", lambda x: jnp.pad(x, 2, mode="symmetric"), [(4,)],
                 description="no ONNX mode for symmetric: lax path"),
        Testcase("pad_vmap", jax.vmap(_reflect), [("B", 2, 4)]),
        Testcase("pad_grad", grad_of_sum(_reflect), [(3, 4)]),
        # Static batch: the gradient of an edge pad crops by a symbolic amount (B - 1), which the lax
        # pack's pad lowering does not compute in the graph yet (a known gap, see the lax pad notes).
        Testcase("pad_edge_grad", grad_of_sum(lambda x: jnp.pad(x, ((1, 0), (2, 2)), mode="edge")), [(4, 3)]),
    ]),
]

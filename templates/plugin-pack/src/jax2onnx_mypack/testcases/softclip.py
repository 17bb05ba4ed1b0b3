"""Testcases of the ``mypack_softclip`` lowering (:mod:`jax2onnx_mypack.softclip`): data the pytest plugin turns into tests."""

from __future__ import annotations

import jax.numpy as jnp
from jax2onnx.testing import Component, Testcase

from .. import example_library as lib

components = [
    Component(
        name="mypack.softclip",
        onnx=["Tanh", "Div", "Mul"],
        since="v0.1.0",
        description="example_library.softclip, a function on its own JAX primitive",
        testcases=[
            # Each testcase runs static and with the symbolic dim B, in float32 and float64:
            # exported, checked with onnx.checker, run in onnxruntime and compared with JAX.
            Testcase("softclip", lambda x: lib.softclip(x, limit=2.0), [("B", 5)],
                     expected_ops=["Tanh"], max_nodes=3),
            Testcase("softclip_in_a_model", lambda x, w: lib.softclip(jnp.tanh(x) @ w), [("B", 4), (4, 3)],
                     expected_ops=["Tanh", "MatMul"]),
        ],
    ),
]

"""Testcases of :mod:`jax2onnx_nnx.instance_norm` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from flax import nnx
from jax2onnx.testing import Component, Testcase

from .helpers import fused_budget, model

#: float64 takes flax's own arithmetic (no double InstanceNormalization in onnxruntime).
_FUSED = {"expected_ops": ["InstanceNormalization"], "expected_ops_f64": ()}


components = [] if not hasattr(nnx, "InstanceNorm") else [  # flax >= 0.11
    Component(
        name="nnx.instance_norm",
        onnx=["InstanceNormalization", "Transpose"],
        since="v0.7.0",
        testcases=[
            Testcase("instance_norm", factory=model(lambda: nnx.InstanceNorm(4, rngs=nnx.Rngs(0))),
                     input_shapes=[("B", 5, 5, 4)], **_FUSED, check=fused_budget(max_nodes=3)),
            Testcase("instance_norm_1d_channels_first",
                     factory=model(lambda: nnx.InstanceNorm(3, feature_axes=1, rngs=nnx.Rngs(0))),
                     input_shapes=[("B", 3, 6)], **_FUSED, check=fused_budget(max_nodes=1)),
        ],
    ),
]

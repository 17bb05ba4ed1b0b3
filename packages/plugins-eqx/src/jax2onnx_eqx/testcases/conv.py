"""Testcases of :mod:`jax2onnx_eqx.conv` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import equinox as eqx
import jax
from jax2onnx.testing import Component, Testcase

from ._testing import float32_ops, model, vmapped

_CONV = float32_ops("Conv", forbids=("Add", "Transpose"))


components = [
    Component(
        name="eqx.conv",
        onnx=["Conv", "Unsqueeze", "Squeeze", "ConvTranspose"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_conv2d", factory=model(lambda k: eqx.nn.Conv2d(2, 3, 3, padding=1, key=k)),
                     input_shapes=[(2, 6, 6)], check=float32_ops("Conv", forbids=("Add", "Transpose"), max_nodes=3)),
            Testcase("eqx_conv2d_vmapped",
                     factory=model(lambda k: eqx.nn.Conv2d(2, 3, 3, stride=2, key=k), wrap=vmapped),
                     input_shapes=[("B", 2, 7, 7)], check=float32_ops("Conv", forbids=("Add", "Transpose"), max_nodes=1)),
            Testcase("eqx_conv2d_same_grouped",
                     factory=model(lambda k: eqx.nn.Conv2d(4, 6, 3, padding="SAME", groups=2, use_bias=False, key=k),
                                   wrap=vmapped),
                     input_shapes=[("B", 4, 5, 5)], check=float32_ops("Conv", max_nodes=1)),
            # Two vmaps: both batch axes folded into ONNX's N with a Reshape, and back.
            Testcase("eqx_conv2d_nested_vmap",
                     factory=model(lambda k: eqx.nn.Conv2d(2, 3, 3, key=k), wrap=lambda m: jax.vmap(jax.vmap(m))),
                     input_shapes=[("B", 2, 2, 5, 5)], check=float32_ops("Conv", forbids=("Transpose",), max_nodes=5)),
            Testcase("eqx_conv1d_dilated", factory=model(lambda k: eqx.nn.Conv1d(2, 4, 3, dilation=2, key=k)),
                     input_shapes=[(2, 9)], check=_CONV),
            Testcase("eqx_conv3d", factory=model(lambda k: eqx.nn.Conv3d(2, 2, 2, key=k), wrap=vmapped),
                     input_shapes=[("B", 2, 3, 4, 3)], check=_CONV),
            # REFLECT padding: equinox's own code (a Pad, then the convolution), lowered by lax.
            Testcase("eqx_conv2d_reflect",
                     factory=model(lambda k: eqx.nn.Conv2d(2, 3, 3, padding=1, padding_mode="REFLECT", key=k)),
                     input_shapes=[(2, 5, 5)]),
            Testcase("eqx_conv_transpose2d",
                     factory=model(lambda k: eqx.nn.ConvTranspose2d(2, 3, 3, stride=2, key=k), wrap=jax.vmap),
                     input_shapes=[("B", 2, 4, 4)]),
        ],
    ),
]

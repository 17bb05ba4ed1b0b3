"""Testcases of :mod:`jax2onnx_eqx.pooling` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import equinox as eqx
import jax
from jax2onnx.fusion import MAX_POOL_OPS
from jax2onnx.testing import Component, Testcase, channels_last_with_nan

from ._testing import float32_ops, vmapped

components = [
    Component(
        name="eqx.pool",
        onnx=["MaxPool", "AveragePool", "Unsqueeze", "Squeeze"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_max_pool2d", factory=lambda: eqx.nn.MaxPool2d(2, 2), input_shapes=[(3, 6, 6)],
                     expected_ops=MAX_POOL_OPS, max_nodes=6),
            Testcase("eqx_max_pool2d_vmapped", factory=lambda: vmapped(eqx.nn.MaxPool2d(3, 2, padding=1)),
                     input_shapes=[("B", 3, 7, 7)], expected_ops=MAX_POOL_OPS, max_nodes=4),
            Testcase("eqx_max_pool1d", factory=lambda: eqx.nn.MaxPool1d(3, 1), input_shapes=[(2, 6)],
                     expected_ops=MAX_POOL_OPS, max_nodes=6),
            # channels-first: (batch, channels, height, width), one image without the batch axis
            Testcase("eqx_max_pool2d_nan", factory=lambda: eqx.nn.MaxPool2d(2, 2),
                     input_values=[channels_last_with_nan((1, 4, 4, 2)).transpose(0, 3, 1, 2)[0]], expected_ops=MAX_POOL_OPS, max_nodes=6),
            Testcase("eqx_max_pool2d_padded_vmapped_nan", factory=lambda: vmapped(eqx.nn.MaxPool2d(3, 2, padding=1)),
                     input_values=[channels_last_with_nan((2, 5, 5, 2)).transpose(0, 3, 1, 2)], expected_ops=MAX_POOL_OPS, max_nodes=4),
            Testcase("eqx_avg_pool2d", factory=lambda: eqx.nn.AvgPool2d(2, 2), input_shapes=[(3, 6, 6)],
                     check=float32_ops("AveragePool", max_nodes=3)),
            # Padding counts in equinox's divisor, as in count_include_pad=1.
            Testcase("eqx_avg_pool2d_padded_vmapped", factory=lambda: vmapped(eqx.nn.AvgPool2d(3, 2, padding=1)),
                     input_shapes=[("B", 2, 5, 6)], check=float32_ops("AveragePool", max_nodes=1)),
            # A vmap made before the export: the layer's call inside it is lifted all the same.
            Testcase("eqx_max_pool2d_prebuilt_vmap", factory=lambda: jax.vmap(eqx.nn.MaxPool2d(2, 2)),
                     input_shapes=[("B", 3, 6, 6)], expected_ops=MAX_POOL_OPS, max_nodes=4),
            # use_ceil: equinox pads (0, 2) around a window of 2, which the lax pack's reduce_window
            # lowering passes to MaxPool as pads >= kernel; onnxruntime refuses such a MaxPool.
            Testcase("eqx_max_pool2d_ceil", factory=lambda: eqx.nn.MaxPool2d(2, 2, use_ceil=True),
                     input_shapes=[(3, 5, 5)],
                     skip_reason="known gap in the lax pack: reduce_window padding >= window becomes a MaxPool "
                                 "onnxruntime rejects (pads must be smaller than the kernel)"),
        ],
    ),
]

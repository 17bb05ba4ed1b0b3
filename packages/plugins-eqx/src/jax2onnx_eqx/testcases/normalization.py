"""Testcases of :mod:`jax2onnx_eqx.normalization` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import equinox as eqx
import jax
from jax2onnx.testing import Component, Testcase

from ._testing import model, vmapped

_NO_STATS = ["ReduceMean", "ReduceSum", "Sqrt"]


components = [
    Component(
        name="eqx.layer_norm",
        onnx=["LayerNormalization"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_layer_norm", factory=model(lambda k: eqx.nn.LayerNorm(6)), input_shapes=[(6,)],
                     expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS, max_nodes=1),
            Testcase("eqx_layer_norm_2d", factory=model(lambda k: eqx.nn.LayerNorm((3, 4), eps=1e-3)),
                     input_shapes=[(3, 4)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS, max_nodes=1),
            Testcase("eqx_layer_norm_no_affine",
                     factory=model(lambda k: eqx.nn.LayerNorm(5, use_weight=False, use_bias=False)),
                     input_shapes=[(5,)], expected_ops=["LayerNormalization"], max_nodes=1),
            Testcase("eqx_layer_norm_vmapped", factory=model(lambda k: eqx.nn.LayerNorm(6), wrap=vmapped),
                     input_shapes=[("B", 6)], expected_ops=["LayerNormalization"], forbidden_ops=_NO_STATS,
                     max_nodes=1),
            # vmap over positions of a sequence, inside a vmap over the batch: equinox's math.
            Testcase("eqx_layer_norm_nested_vmap",
                     factory=model(lambda k: eqx.nn.LayerNorm(6), wrap=lambda m: jax.vmap(jax.vmap(m))),
                     input_shapes=[("B", 3, 6)]),
        ],
    ),
    Component(
        name="eqx.rms_norm",
        onnx=["RMSNormalization", "Add"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_rms_norm", factory=model(lambda k: eqx.nn.RMSNorm(6)), input_shapes=[(6,)],
                     expected_ops=["RMSNormalization", "Add"], forbidden_ops=_NO_STATS, max_nodes=2),
            Testcase("eqx_rms_norm_vmapped", factory=model(lambda k: eqx.nn.RMSNorm(6), wrap=vmapped),
                     input_shapes=[("B", 6)], expected_ops=["RMSNormalization"], max_nodes=2),
            Testcase("eqx_rms_norm_no_bias", factory=model(lambda k: eqx.nn.RMSNorm((2, 5), use_bias=False)),
                     input_shapes=[(2, 5)], expected_ops=["RMSNormalization"], max_nodes=1),
        ],
    ),
    Component(
        name="eqx.group_norm",
        onnx=["GroupNormalization", "Unsqueeze", "Squeeze"],
        since="v0.7.0",
        testcases=[
            Testcase("eqx_group_norm", factory=model(lambda k: eqx.nn.GroupNorm(2, 6)), input_shapes=[(6, 4, 4)],
                     expected_ops=["GroupNormalization"], forbidden_ops=_NO_STATS, max_nodes=3),
            Testcase("eqx_group_norm_vmapped", factory=model(lambda k: eqx.nn.GroupNorm(2, 6), wrap=vmapped),
                     input_shapes=[("B", 6, 4, 4)], expected_ops=["GroupNormalization"], max_nodes=1),
            Testcase("eqx_group_norm_no_affine",
                     factory=model(lambda k: eqx.nn.GroupNorm(3, 6, channelwise_affine=False)),
                     input_shapes=[(6, 5)], expected_ops=["GroupNormalization"], max_nodes=3),
            # channels=None (allowed without affine weights): the channel count comes from the input.
            Testcase("eqx_group_norm_no_channels",
                     factory=model(lambda k: eqx.nn.GroupNorm(2, channels=None, channelwise_affine=False)),
                     input_shapes=[(4, 3, 3)], expected_ops=["GroupNormalization"], max_nodes=3),
            Testcase("eqx_group_norm_no_channels_vmapped",
                     factory=model(lambda k: eqx.nn.GroupNorm(2, channels=None, channelwise_affine=False),
                                   wrap=vmapped),
                     input_shapes=[("B", 4, 5)], expected_ops=["GroupNormalization"]),
        ],
    ),
]

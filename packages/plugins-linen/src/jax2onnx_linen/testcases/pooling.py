"""Testcases of :mod:`jax2onnx_linen.pooling` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from flax import linen as nn
from jax2onnx.fusion import MAX_POOL_OPS
from jax2onnx.testing import Component, Testcase, channels_last_with_nan

from ._testing import float32_ops

_AVG = float32_ops("AveragePool", max_nodes=3)


components = [
    Component(
        name="linen.avg_pool",
        onnx=["AveragePool", "Transpose"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_avg_pool", lambda x: nn.avg_pool(x, (2, 2), (2, 2)), [("B", 6, 6, 3)], check=_AVG),
            # Padded positions do not count: the divisor is the number of real elements.
            Testcase("linen_avg_pool_same_exclude_pad",
                     lambda x: nn.avg_pool(x, (3, 3), (2, 2), "SAME", count_include_pad=False), [("B", 5, 6, 2)],
                     check=_AVG),
            Testcase("linen_avg_pool_1d_explicit_padding", lambda x: nn.avg_pool(x, (3,), (2,), ((1, 2),)),
                     [("B", 6, 2)], check=_AVG),
        ],
    ),
    Component(
        name="linen.max_pool",
        onnx=["MaxPool", "Transpose"],
        since="v0.1.0",
        testcases=[
            Testcase("linen_max_pool", lambda x: nn.max_pool(x, (2, 2), (2, 2)), [("B", 6, 6, 3)],
                     expected_ops=MAX_POOL_OPS, max_nodes=6),
            Testcase("linen_max_pool_same", lambda x: nn.max_pool(x, (3, 3), (2, 2), "SAME"), [("B", 5, 5, 3)],
                     expected_ops=MAX_POOL_OPS, max_nodes=6),
            Testcase("linen_max_pool_symbolic_spatial", lambda x: nn.max_pool(x, (2, 2), (2, 2), "SAME"),
                     [("B", "H", "W", 3)], expected_ops=MAX_POOL_OPS, max_nodes=6),
            Testcase("linen_max_pool_nan", lambda x: nn.max_pool(x, (2, 2), (2, 2)), input_values=[channels_last_with_nan((2, 4, 4, 2))],
                     expected_ops=MAX_POOL_OPS, max_nodes=6),
        ],
    ),
]

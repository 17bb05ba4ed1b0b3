"""nn.avg_pool, nn.max_pool → AveragePool / MaxPool, channels-last at the edges.

flax's pools are ``lax.reduce_window`` over (batch, spatial..., features); ``avg_pool`` divides by
the window size (``count_include_pad``) or by the number of real elements, which is exactly
AveragePool's ``count_include_pad`` attribute. Padding becomes explicit pads for static spatial
sizes (JAX's SAME puts the odd element at the end, as ONNX's SAME_UPPER does, used when the spatial
sizes are symbolic). Inputs without a batch axis or with several, and float64 average pooling (no
double AveragePool kernel in onnxruntime), are left to flax's code and the lax pack.
A window holding a NaN is NaN, as in JAX (``jax2onnx.fusion.max_pool``: onnxruntime's MaxPool skips NaN).
"""

from __future__ import annotations

from flax import linen as nn
from jax2onnx.fusion import MAX_POOL_OPS, lower_avg_pool_channels_last, lower_max_pool_channels_last, pool_patches
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase, channels_last_with_nan

from ._testing import float32_ops

lowerings = Lowerings()

AVG_POOL = "jax2onnx_linen.avg_pool"
MAX_POOL = "jax2onnx_linen.max_pool"


patches = pool_patches("flax.linen", AVG_POOL, MAX_POOL)

lowerings.add(f"call:{AVG_POOL}", lower_avg_pool_channels_last)
lowerings.add(f"call:{MAX_POOL}", lower_max_pool_channels_last)


# ---------------------------------------------------------------------------------------------
# Testcases

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

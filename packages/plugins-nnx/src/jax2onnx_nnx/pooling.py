"""nnx.avg_pool, nnx.max_pool → AveragePool / MaxPool, channels-last at the edges.

flax's pools (``flax.linen.pooling``, re-exported by ``flax.nnx``) are ``lax.reduce_window`` over
(batch, spatial..., features); ``avg_pool`` divides by the window size (``count_include_pad``) or
by the number of real elements, which is exactly AveragePool's ``count_include_pad`` attribute.
Padding is explicit pads for static spatial sizes (JAX's SAME puts the odd element at the end, as
ONNX's SAME_UPPER does, used when the spatial sizes are symbolic). Inputs without a batch axis or
with several, and float64 average pooling (no double AveragePool in onnxruntime), are left to
flax's code and the lax pack. A window holding a NaN is NaN, as in JAX (``jax2onnx.fusion.max_pool``: onnxruntime's MaxPool skips NaN).
"""

from __future__ import annotations

from jax2onnx.fusion import pool_lowerings
from jax2onnx.plugin import Lowerings

lowerings = Lowerings()

# flax.nnx's pools are plain functions: each call is found by the equations it emits (no patch)
pool_lowerings(lowerings, "flax.nnx")

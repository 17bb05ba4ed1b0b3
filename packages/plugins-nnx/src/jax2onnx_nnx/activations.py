"""Activations as NNX models use them: ``nnx.relu``, ``nnx.gelu``, … and the ``nnx.PReLU`` module.

``flax.nnx`` re-exports the ``jax.nn`` / ``jax.numpy`` functions; the jnp pack patches those
re-exports, so this module only checks them as an NNX user calls them (the seed's ``nnx.*`` rows).
``nnx.PReLU`` (flax >= 0.11) is a module with a learned slope, lowered here to ``PRelu``.

Several ONNX activation ops have no float64 kernel in onnxruntime; their float64 exports use the
decomposition instead, so those rows assert the op on the float32 export only.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.fusion import Operands, one_output_like
from jax2onnx.plugin import Lowerings, ModulePatch, is_array

from ._fusion import call_module, graphdef_node_types

lowerings = Lowerings()

PRELU = "jax2onnx_nnx.prelu"


def _patch_prelu(original):
    def __call__(self, inputs, *args, **kwargs):
        if args or kwargs or not is_array(inputs):
            return original(self, inputs, *args, **kwargs)
        return call_module(PRELU, self, lambda m, x: original(m, x), {"x": inputs})

    return __call__


patches = [ModulePatch("flax.nnx.PReLU", "__call__", _patch_prelu, holders=graphdef_node_types)]  # skipped where flax has no PReLU


@lowerings.register_call(PRELU)
def lower_prelu(ctx, *ins):
    ops = Operands(ctx, ins)
    dtype = np.dtype(ctx.avals_out[0].dtype)
    # onnxruntime's PRelu is float32/float16 only.
    if dtype == np.float64 or "negative_slope" not in ops or not one_output_like(ctx, ops.shape("x")):
        return None
    return ctx.op.PRelu(ctx.cast(ops["x"], dtype), ctx.cast(ops["negative_slope"], dtype))

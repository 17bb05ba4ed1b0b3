"""A module-level fusion: every call of ``example_library.mish`` becomes one ONNX ``Mish`` node.

While jax2onnx exports (and only then, only in the exporting thread), the patch replaces
``example_library.mish`` with a function that wraps the original in ``marked_call``: a named
``jax.jit`` region whose body is the library's own code. Core offers the region to the
``call:mypack.mish`` lowering; the lowering emits ``Mish`` or returns ``None`` to decline, and
then core lowers the body (the library's arithmetic) instead. So the export is right wherever
the fused op cannot be used: under ``jax.vmap``/``jax.grad`` (the region changes shape or is
differentiated), at opsets before 18 (no ``Mish`` yet), and in float64 (onnxruntime's ``Mish``
is float32 only).
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from jax2onnx.plugin import Lowerings, Patch, marked_call
from jax2onnx.testing import Component, Testcase

from . import example_library as lib

MARK = "mypack.mish"


def _fused(original):
    @functools.wraps(original)
    def mish(x):
        return marked_call(MARK, original, x)

    return mish


# Target by import path: the module attribute user code looks up at call time (lib.mish(x)).
# Code that did `from example_library import mish` before the export holds the original
# function; patch every name your users call it by.
patches = [Patch("jax2onnx_mypack.example_library", "mish", _fused)]

lowerings = Lowerings()


@lowerings.register_call(MARK)
def lower_mish(ctx, x):
    if np.dtype(ctx.avals_in[0].dtype) != np.float32:
        return None  # decline: the body (softplus, tanh, mul) is exported, exact in any dtype
    return ctx.op.Mish(x)  # at opsets before 18 this raises, and core lowers the body instead


def _one_node_in_float32(model, variant):
    """float32: the whole call is one Mish node. float64: declined, so the body and no Mish."""
    ops = [n.op_type for n in model.graph.node]
    if variant.double:
        assert "Mish" not in ops, ops
    elif variant.opset is None or variant.opset >= 18:  # Mish exists from opset 18
        assert ops == ["Mish"], ops


def _wide(rng, shape, dtype):
    """Values across [-6, 6], both tails of the curve."""
    return rng.uniform(-6.0, 6.0, size=shape).astype(dtype)


components = [
    Component(
        name="mypack.mish",
        onnx=["Mish"],
        since="v0.1.0",
        description="example_library.mish fused into one Mish node (its body where Mish cannot be used)",
        testcases=[
            Testcase("mish", lambda x: lib.mish(x), [("B", 6)], input_generator=_wide,
                     expected_ops=["Mish"], expected_ops_f64=(), check=_one_node_in_float32),
            # Under vmap the region's operand gains a batch axis: core lowers the body, no Mish.
            Testcase("mish_under_vmap", lambda x: jax.vmap(lib.mish)(x), [("B", 6)], input_generator=_wide,
                     forbidden_ops=["Mish"]),
        ],
    ),
]

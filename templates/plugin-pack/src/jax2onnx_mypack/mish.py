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

import numpy as np
from jax2onnx.plugin import Lowerings, Patch, marked_call

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

"""A library-function fusion: every call of ``example_library.mish`` becomes one ONNX ``Mish`` node.

Nothing of the library is replaced. ``example_library.mish`` is a plain Python function, so each
call leaves its equations in the trace, and their source tracebacks pass through it: core finds
the call by them (a jitted function would be found by its ``jit`` equation instead), asks
``recognize`` for the call's static parameters (mish has none), checks them by tracing
``mish`` again at the call's shapes (only the same equations are accepted), and hands the call to
the lowering. The lowering emits ``Mish`` or returns ``None`` to decline, and then core lowers the
equations (the library's arithmetic) instead. So the export is right wherever the fused op cannot
be used: at opsets before 18 (no ``Mish`` yet), in float64 (onnxruntime's ``Mish`` is float32
only), and under ``jax.grad`` (the differentiated equations are not mish's).
"""

from __future__ import annotations

import numpy as np
from jax2onnx.plugin import Lowerings

lowerings = Lowerings()


def recognize_mish(site):
    """The call's parameters, read back from its equations (``site.body``): mish takes none."""
    return {} if len(site.operands) == 1 else None


# The function's import path: every name it is called by (``lib.mish``, a ``from ... import mish``
# taken at any time) is the same function, so this one registration covers them all.
@lowerings.register_library("jax2onnx_mypack.example_library.mish", recognize=recognize_mish)
def lower_mish(ctx, x):
    if np.dtype(ctx.avals_in[0].dtype) != np.float32:
        return None  # decline: the body (softplus, tanh, mul) is exported, exact in any dtype
    return ctx.op.Mish(x)  # at opsets before 18 this raises, and core lowers the body instead

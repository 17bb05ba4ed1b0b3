"""Primitives JAX's linear-algebra functions emit around the factorisations: ``platform_index``;
and ``cholesky_update``, ``symmetric_product``, ``ormqr``, which JAX itself lowers (off GPU) with a
generic decomposition made of other lax ops (Givens rotations, a matmul, reflectors applied in a
loop): the lowerings trace that same function, so the graph computes what JAX computes.

``platform_index`` picks a ``cond`` branch by the compilation platform (``jnp.linalg.slogdet`` has a
TPU-specific branch). An ONNX model runs on the CPU/GPU execution providers, so it takes the branch
JAX would take when compiling for CPU: the one listing ``cpu``, else the default (``None``) one.
"""

from __future__ import annotations

import numpy as np
from jax2onnx import compat
from jax2onnx.plugin import Lowerings

lowerings = Lowerings()


@lowerings.register("platform_index")
def lower_platform_index(ctx):
    platforms = ctx.params["platforms"]
    chosen = next((i for i, ps in enumerate(platforms) if ps is not None and "cpu" in ps), None)
    if chosen is None:
        chosen = next((i for i, ps in enumerate(platforms) if ps is None), None)
    if chosen is None:
        raise NotImplementedError(
            f"platform_index: none of the platform branches {platforms} applies to CPU and there is no default "
            "branch; the ONNX export needs a CPU branch (lax.platform_dependent(..., default=...))."
        )
    return ctx.const(np.asarray(chosen, dtype=np.dtype(ctx.avals_out[0].dtype)))


def _generic(name):
    def lower(ctx, *args):
        fn = compat.linalg_decomposition(name)
        params = dict(ctx.params)
        return ctx.lower_function(lambda *xs: fn(*xs, **params), args)

    lower.__name__ = f"lower_{name}"
    return lower


for _name in ("cholesky_update", "symmetric_product", "ormqr"):
    lowerings.add(_name, _generic(_name))

"""Primitives JAX's linear-algebra functions emit around the factorisations: ``platform_index``.

``platform_index`` picks a ``cond`` branch by the compilation platform (``jnp.linalg.slogdet`` has a
TPU-specific branch). An ONNX model runs on the CPU/GPU execution providers, so it takes the branch
JAX would take when compiling for CPU: the one listing ``cpu``, else the default (``None``) one.
"""

from __future__ import annotations

import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

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


_TOL = dict(rtol=1e-4, atol=1e-5, rtol_f64=1e-10, atol_f64=1e-11)


def _moderate(rng, shape, dtype):
    """Entries of order 1 with a spread of eigenvalues: expm's Pade degree/scaling selection varies."""
    return rng.standard_normal(shape) * 0.8


components = [
    Component("lax.platform_index", onnx=["If"], since="v0.8.0", testcases=[
        # slogdet/det of n >= 4 choose a reduction branch per platform (lu inside)
        Testcase("det", jnp.linalg.det, [(4, 4)], **_TOL),
        Testcase("det_batched", jnp.linalg.det, [("B", 5, 5)], **_TOL),
        Testcase("slogdet", jnp.linalg.slogdet, [(2, 5, 5)], **_TOL),
        Testcase("tensorinv", lambda a: jnp.linalg.tensorinv(a.reshape(4, 2, 2), 1), [(4, 4)], **_TOL),
        Testcase("expm", jsl.expm, [(4, 4)], input_generator=_moderate, rtol=5e-4, atol=5e-5, rtol_f64=1e-9,
                 atol_f64=1e-10),
        Testcase("expm_large_norm", lambda a: jsl.expm(3.0 * a), [(3, 3)], rtol=5e-4, atol=5e-4, rtol_f64=1e-9,
                 atol_f64=1e-9),
    ]),
]

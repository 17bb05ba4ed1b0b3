"""nnx.Dropout → nothing when deterministic, ONNX ``Dropout`` when the choice is made at run time.

``model.eval()`` (or ``deterministic=True``) makes flax return its input: no node at all. When
``deterministic`` is a traced value (a runtime input through ``input_params``), Python cannot
branch on it, so the call becomes a marked region whose lowering is one ``Dropout`` with
``training_mode = not deterministic``. A model exported in training mode (``deterministic=False``)
also becomes ``Dropout`` in training mode rather than consuming the module's RNG state inside the
trace (which would leave a tracer in the module).

The region's body (what JAX transformations and the fallback lowering see) returns ``x`` when
deterministic, and otherwise a dropout drawn with a fixed key: the ONNX ``Dropout`` draws its own
mask at run time, so the two agree in distribution only, never sample by sample.

A call given ``rngs=`` (``nnx.Rngs(dropout=key)`` with a key the caller feeds, e.g. a graph input)
is flax's own dropout, traced as is: jax.random lowers bit-exactly (lax pack), so the exported mask
equals JAX's for the same key, and each inference call can pass a fresh key.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from jax2onnx.fusion import static_bool
from jax2onnx.plugin import Lowerings, ModulePatch, exporting, is_array, marked_call

from ._fusion import graphdef_node_types

lowerings = Lowerings()

DROPOUT = "jax2onnx_nnx.dropout"


def _dropout_body(x: Any, deterministic: Any, *, rate: float, broadcast_dims: tuple[int, ...]) -> Any:
    keep_prob = 1.0 - rate
    if keep_prob <= 0.0:
        return jnp.where(deterministic, x, jnp.zeros_like(x))
    mask_shape = [1 if i in broadcast_dims else d for i, d in enumerate(x.shape)]
    keep = jax.random.bernoulli(jax.random.PRNGKey(0), keep_prob, mask_shape)
    dropped = jnp.where(keep, x / jnp.asarray(keep_prob, x.dtype), jnp.zeros_like(x))
    return jnp.where(deterministic, x, dropped)


def _patch_dropout(original):
    def __call__(self, inputs, *, deterministic=None, rngs=None, **kwargs):
        flag = deterministic if deterministic is not None else self.deterministic
        static = static_bool(flag)
        rate = float(self.rate)
        if (
            not exporting()
            or static is True  # flax returns the input: no node
            or rngs is not None
            or kwargs
            or not is_array(inputs)
            or not (static is False or is_array(flag))
            or rate == 0.0
        ):
            return original(self, inputs, deterministic=deterministic, rngs=rngs, **kwargs)
        dims = tuple(int(d) % inputs.ndim for d in self.broadcast_dims)
        return marked_call(DROPOUT, _dropout_body, inputs, jnp.asarray(flag, dtype=bool), rate=rate,
                           broadcast_dims=dims)

    return __call__


patches = [ModulePatch("flax.nnx.Dropout", "__call__", _patch_dropout, holders=graphdef_node_types)]


@lowerings.register_call(DROPOUT)
def lower_dropout(ctx, x, deterministic):
    p = ctx.marked.params
    # ONNX draws one mask element per input element: no broadcast masks; ratio must be < 1.
    if len(ctx.avals_out) != 1 or p["broadcast_dims"] or not 0.0 <= p["rate"] < 1.0:
        return None
    ratio = ctx.const(p["rate"], ctx.avals_in[0].dtype)
    return ctx.op.Dropout(x, ratio, ctx.op.Not(deterministic))

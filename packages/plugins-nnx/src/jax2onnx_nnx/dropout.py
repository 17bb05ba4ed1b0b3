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
from flax import nnx
from jax2onnx.fusion import static_bool
from jax2onnx.plugin import Lowerings, Patch, exporting, is_array, marked_call
from jax2onnx.testing import Component, Testcase

from .cases.helpers import model

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


patches = [Patch("flax.nnx.Dropout", "__call__", _patch_dropout)]


@lowerings.register_call(DROPOUT)
def lower_dropout(ctx, x, deterministic):
    p = ctx.marked.params
    # ONNX draws one mask element per input element: no broadcast masks; ratio must be < 1.
    if len(ctx.avals_out) != 1 or p["broadcast_dims"] or not 0.0 <= p["rate"] < 1.0:
        return None
    ratio = ctx.const(p["rate"], ctx.avals_in[0].dtype)
    return ctx.op.Dropout(x, ratio, ctx.op.Not(deterministic))


class _CallFlag(nnx.Module):
    """Dropout whose ``deterministic`` flag is a call argument (a runtime graph input)."""

    def __init__(self, rate: float, rngs: nnx.Rngs, broadcast_dims: tuple[int, ...] = ()):
        self.dropout = nnx.Dropout(rate, broadcast_dims=broadcast_dims, rngs=rngs)

    def __call__(self, x, deterministic):
        return self.dropout(x, deterministic=deterministic)


class _KeyInput(nnx.Module):
    """Training-mode Dropout drawing from a key the caller passes (a graph input)."""

    def __init__(self, rate: float, broadcast_dims: tuple[int, ...] = ()):
        self.dropout = nnx.Dropout(rate, broadcast_dims=broadcast_dims)

    def __call__(self, key, x):
        return self.dropout(x, deterministic=False, rngs=nnx.Rngs(dropout=jax.random.wrap_key_data(key)))


_KEY_DATA = jax.ShapeDtypeStruct((2,), jnp.uint32)


def _keys_and_normals(rng, shape, dtype):
    if dtype == jnp.uint32:
        return rng.integers(0, 2**32, size=shape, dtype="uint64").astype("uint32")
    return rng.standard_normal(shape)


def _threefry_when_symbolic(model, variant):
    from jax2onnx.testing.runner import op_types, unavailable_ops

    if variant.symbolic:  # the mask's shape follows the batch: drawn in the graph, not folded
        expected = {"BitShift", "BitwiseXor"} - set(unavailable_ops(model, ["BitwiseXor"]))  # < 18: bit planes
        assert expected <= op_types(model), sorted(op_types(model))


#: The mask is JAX's bit for bit: at rate 0.5 the kept values x / 0.5 are exact; at 0.3 XLA divides
#: by 0.7 as a multiplication by its reciprocal (1 ulp off a true division), far below a wrong mask.
_EXACT = {"rtol": 0.0, "atol": 0.0, "rtol_f64": 0.0, "atol_f64": 0.0}
_KEPT_ROUNDING = {"rtol": 2.0**-22, "atol": 0.0, "rtol_f64": 2.0**-51, "atol_f64": 0.0}

components = [
    Component(
        name="nnx.dropout",
        onnx=["Dropout"],
        since="v0.1.0",
        testcases=[
            # deterministic at construction: flax returns the input, the graph has no Dropout.
            Testcase("dropout_init_params", factory=lambda: nnx.Dropout(0.5, deterministic=True, rngs=nnx.Rngs(0)),
                     input_shapes=[("B", 10)], forbidden_ops=["Dropout", "RandomUniformLike", "Where"], max_nodes=1),
            # deterministic at run time: one Dropout with training_mode = not deterministic.
            Testcase("dropout_call_params", factory=lambda: _CallFlag(0.5, nnx.Rngs(0)), input_shapes=[("B", 10)],
                     input_params={"deterministic": True}, expected_ops=["Dropout", "Not"], max_nodes=2),
            Testcase("dropout_eval_mode", factory=model(lambda: nnx.Dropout(0.3, rngs=nnx.Rngs(0)), eval_mode=True, seed=None),
                     input_shapes=[("B", 4, 3)], forbidden_ops=["Dropout"], max_nodes=1),
            # rngs at the call: flax's dropout with the caller's key, the same mask as JAX's.
            Testcase("dropout_key_input", factory=lambda: _KeyInput(0.3), input_shapes=[_KEY_DATA, ("B", 10)],
                     input_generator=_keys_and_normals, expected_ops=["BitShift", "BitwiseXor"],
                     forbidden_ops=["Dropout"], **_KEPT_ROUNDING),
            Testcase("dropout_key_input_broadcast", factory=lambda: _KeyInput(0.5, broadcast_dims=(0,)),
                     input_shapes=[_KEY_DATA, ("B", 4, 3)], input_generator=_keys_and_normals, **_EXACT),
            # runtime flag with a broadcast mask: ONNX Dropout cannot, so the region's body (a fixed-key
            # jax.random dropout behind a Where on the flag) is exported; JAX runs it deterministic. With
            # static shapes the fixed-key mask is folded to a constant; a symbolic batch keeps threefry.
            Testcase("dropout_call_params_broadcast", factory=lambda: _CallFlag(0.5, nnx.Rngs(0), broadcast_dims=(1,)),
                     input_shapes=[("B", 4, 3)], input_params={"deterministic": True},
                     expected_ops=["Where"], forbidden_ops=["Dropout"], check=_threefry_when_symbolic),
        ],
    ),
]

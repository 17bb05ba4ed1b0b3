"""Testcases of :mod:`jax2onnx_nnx.dropout` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import nnx
from jax2onnx.testing import Component, Testcase

from .helpers import model


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

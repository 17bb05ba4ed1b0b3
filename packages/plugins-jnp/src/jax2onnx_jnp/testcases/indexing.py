"""Testcases of :mod:`jax2onnx_jnp.indexing` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.testing import Component, Testcase

from .helpers import grad_of_sum


def _some_out_of_range(rng, shape, dtype):
    """Indices in [-5, 6]: negative, in range and past the end (axis sizes here are 3 to 5)."""
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-5, 7, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _take_axis1(x, i):
    return jnp.take(x, i, axis=1)


def _along(x, i):
    return jnp.take_along_axis(x, i, axis=1)


_I2 = jax.ShapeDtypeStruct((2,), jnp.int32)


_I_B4 = jax.ShapeDtypeStruct(("B", 4), jnp.int32)


components = [
    Component(name="jnp.take", onnx=["Gather"], since="v0.7.0", testcases=[
        Testcase("take_axis1", _take_axis1, [("B", 4, 3), jax.ShapeDtypeStruct((2, 3), jnp.int32)],
                 expected_ops=["Gather"], input_generator=_some_out_of_range,
                 description="default mode 'fill': out-of-range indices give NaN, as in JAX"),
        Testcase("take_flat", lambda x, i: jnp.take(x, i), [("B", 3), _I2], expected_ops=["Gather"],
                 input_generator=_some_out_of_range),
        Testcase("take_clip", lambda x, i: jnp.take(x, i, axis=0, mode="clip"), [(4, "B"), _I2],
                 expected_ops=["Gather"], forbidden_ops=["Where"], input_generator=_some_out_of_range),
        Testcase("take_wrap", lambda x, i: jnp.take(x, i, axis=-1, mode="wrap"), [("B", 5), _I2],
                 expected_ops=["Gather"], forbidden_ops=["Where"], input_generator=_some_out_of_range),
        Testcase("take_int_fill", lambda x, i: jnp.take(x, i, axis=0, fill_value=-1),
                 [jax.ShapeDtypeStruct((5,), jnp.int32), _I2], expected_ops=["Gather"],
                 input_generator=_some_out_of_range),
        Testcase("take_vmap", jax.vmap(_take_axis1), [("B", 4, 3), jax.ShapeDtypeStruct(("B", 2), jnp.int32)],
                 input_generator=_some_out_of_range),
        Testcase("take_grad", grad_of_sum(lambda x, i: jnp.take(x, i, axis=1, mode="clip")),
                 [("B", 4, 3), jax.ShapeDtypeStruct((2, 3), jnp.int32)], input_generator=_some_out_of_range),
    ]),
    Component(name="jnp.take_along_axis", onnx=["GatherElements"], since="v0.7.0", testcases=[
        Testcase("take_along_axis", _along, [("B", 5), _I_B4], expected_ops=["GatherElements"],
                 input_generator=_some_out_of_range),
        Testcase("take_along_axis_clip", lambda x, i: jnp.take_along_axis(x, i, axis=0, mode="clip"),
                 [(5, "B"), jax.ShapeDtypeStruct((3, "B"), jnp.int32)], expected_ops=["GatherElements"],
                 input_generator=_some_out_of_range),
        Testcase("take_along_axis_argsort", lambda x: jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1),
                 [("B", 4)], expected_ops=["GatherElements"]),
        Testcase("take_along_axis_vmap", jax.vmap(_along), [("B", 3, 5), jax.ShapeDtypeStruct(("B", 3, 4), jnp.int32)],
                 input_generator=_some_out_of_range),
        Testcase("take_along_axis_grad", grad_of_sum(lambda x, i: jnp.take_along_axis(x, i, axis=1, mode="clip")),
                 [("B", 5), _I_B4], input_generator=_some_out_of_range),
    ]),
]

"""Testcases of :mod:`jax2onnx_jnp.sorting` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.testing import Component, Testcase

from .helpers import grad_of_sum


def _ties(rng, shape, dtype):
    """Few distinct values, so stability is exercised."""
    return rng.integers(0, 3, size=shape).astype(dtype)


#: uint64 on both sides of 2**63 (the x64 variants; JAX narrows them to uint32 without x64)
_U64_ROWS = np.asarray([[0, 2**63 + 5, 2**64 - 1, 7, 2**63 + 5], [2**63, 1, 2**63 - 1, 2**62, 1]], np.uint64)


def _argsort_rows(x):
    return jnp.argsort(x, axis=-1)


components = [
    Component(name="jnp.sort", onnx=["TopK"], since="v0.5.2", testcases=[
        Testcase("sort_1d", lambda x: jnp.sort(x), [(5,)], expected_ops=["TopK"]),
        Testcase("sort_2d_axis0", lambda x: jnp.sort(x, axis=0), [("B", 3)], expected_ops=["TopK"]),
        Testcase("sort_descending", lambda x: jnp.sort(x, axis=1, descending=True), [("B", 4)],
                 expected_ops=["TopK"]),
        Testcase("sort_flat", lambda x: jnp.sort(x, axis=None), [("B", 3)], expected_ops=["TopK"]),
        Testcase("sort_int", lambda x: jnp.sort(x), [jax.ShapeDtypeStruct(("B", 4), jnp.int32)],
                 expected_ops=["TopK"]),
        Testcase("sort_vmap", jax.vmap(lambda x: jnp.sort(x, axis=0)), [("B", 3, 4)]),
        Testcase("sort_grad", grad_of_sum(lambda x: jnp.sort(x, axis=-1)), [("B", 4)]),
        # no TopK kernel for uint16/32/64: the fused form declines and the lax body sorts by a key
        Testcase("sort_uint32", lambda x: jnp.sort(x, axis=1), [jax.ShapeDtypeStruct(("B", 5), jnp.uint32)],
                 input_generator=lambda rng, shape, dtype: rng.integers(0, 2**32, size=shape).astype(dtype)),
        Testcase("sort_uint64", lambda x: jnp.sort(x, axis=1), input_values=[_U64_ROWS]),
    ]),
    Component(name="jnp.argsort", onnx=["TopK"], since="v0.7.0", testcases=[
        Testcase("argsort", _argsort_rows, [("B", 6)], expected_ops=["TopK"], input_generator=_ties),
        Testcase("argsort_descending", lambda x: jnp.argsort(x, axis=0, descending=True), [(6, "B")],
                 expected_ops=["TopK"], input_generator=_ties),
        Testcase("argsort_vmap", jax.vmap(_argsort_rows), [("B", 2, 6)], input_generator=_ties),
        Testcase("argsort_uint64", _argsort_rows, input_values=[_U64_ROWS]),
    ]),
    Component(name="jnp.argmax", onnx=["ArgMax"], since="v0.7.0", testcases=[
        Testcase("argmax", lambda x: jnp.argmax(x, axis=1), [("B", 4)], expected_ops=["ArgMax"]),
        Testcase("argmax_keepdims", lambda x: jnp.argmax(x, axis=0, keepdims=True), [(4, "B")],
                 expected_ops=["ArgMax"]),
        Testcase("argmax_ties", lambda x: jnp.argmax(x, axis=-1), [("B", 6)], expected_ops=["ArgMax"],
                 input_generator=_ties, description="the first maximum wins, as in JAX"),
    ]),
    Component(name="jnp.argmin", onnx=["ArgMin"], since="v0.7.0", testcases=[
        Testcase("argmin", lambda x: jnp.argmin(x, axis=1), [("B", 4)], expected_ops=["ArgMin"]),
        Testcase("argmin_keepdims", lambda x: jnp.argmin(x, axis=-1, keepdims=True), [("B", 6)],
                 expected_ops=["ArgMin"], input_generator=_ties),
    ]),
]

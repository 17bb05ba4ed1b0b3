"""Testcases of :mod:`jax2onnx_lax.sort` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ._testdata import spec


def _small_ints(rng, shape, dtype):
    """Few distinct values, so ties (and the stability they test) are common."""
    return rng.integers(0, 3, size=shape).astype(dtype)


def _complex_ties(z):
    """complex numbers whose real parts tie often (rounded), so the imaginary part decides."""
    return lax.complex(jnp.round(z[..., 0]), z[..., 1])


_NAN_INPUT = np.array([[1.0, np.nan, -np.inf, 3.0, 0.5, np.inf, -2.0, np.nan]], dtype=np.float32)


components = [
    Component(
        name="lax.sort",
        onnx=["TopK", "GatherElements"],
        since="v0.2.0",
        testcases=[
            Testcase("sort_1d", lambda x: lax.sort(x), [("N",)], expected_ops=["TopK"], max_nodes=2),
            Testcase("sort_2d", lambda x: lax.sort(x, dimension=0), [("B", 3)], expected_ops=["TopK"]),
            Testcase("sort_3d_middle_axis", lambda x: jnp.sort(x, axis=1), [(2, "N", 3)], expected_ops=["TopK"]),
            Testcase("sort_with_values", lambda k, v: lax.sort((k, v), dimension=1, num_keys=1),
                     [("B", 5), ("B", 5)], expected_ops=["TopK", "GatherElements"]),
            Testcase("sort_two_keys_lexicographic", lambda a, b, v: lax.sort((a, b, v), num_keys=2, is_stable=True),
                     [spec("N"), spec("N"), ("N",)], input_generator=_small_ints, static_sizes={"N": 9},
                     expected_ops=["TopK", "GatherElements"]),
            Testcase("sort_int32_stable_ties", lambda k, v: lax.sort((k, v), num_keys=1, is_stable=True),
                     [spec("N"), ("N",)], input_generator=_small_ints, static_sizes={"N": 8}),
            Testcase("sort_uint32_keys", lambda k, v: lax.sort((k, v), num_keys=1, is_stable=True),
                     [spec("N", dtype=jnp.uint32), ("N",)], expected_ops=["TopK", "Cast"]),
            Testcase("sort_bool_keys", lambda k, v: lax.sort((k, v), num_keys=1, is_stable=True),
                     [spec("N", dtype=jnp.bool_), ("N",)]),
            Testcase("sort_nan_last", lambda x: jnp.sort(x, axis=-1), [], input_values=[_NAN_INPUT]),
            Testcase("argsort", lambda x: jnp.argsort(x, axis=-1), [("B", 6)], expected_ops=["TopK"]),
            Testcase("argsort_ties", lambda x: jnp.argsort(x, axis=0, stable=True), [spec("N", 2)],
                     input_generator=_small_ints, static_sizes={"N": 7}),
            # Complex keys sort by real part, then imaginary part (JAX's order); pairs move whole.
            Testcase("sort_complex", lambda z: jnp.sort(_complex_ties(z)), [("N", 2)], static_sizes={"N": 9},
                     expected_ops=["TopK", "GatherElements"]),
            Testcase("sort_complex_2d_axis0", lambda z: jnp.sort(_complex_ties(z), axis=0), [("N", 3, 2)],
                     static_sizes={"N": 6}, expected_ops=["TopK"]),
            Testcase("argsort_complex", lambda z: jnp.argsort(_complex_ties(z), stable=True), [("N", 2)],
                     static_sizes={"N": 8}, expected_ops=["TopK"]),
            Testcase("sort_complex_values", lambda k, a, b: lax.sort((k, lax.complex(a, b)), num_keys=1),
                     [("B", 5), ("B", 5), ("B", 5)], expected_ops=["TopK", "GatherElements"]),
        ],
    ),
    Component(
        name="lax.top_k",
        onnx=["TopK"],
        since="v0.2.0",
        testcases=[
            Testcase("top_k", lambda x: lax.top_k(x, 3), [("B", 6)], expected_ops=["TopK"]),
            Testcase("top_k_uint64", lambda x: lax.top_k(x, 2),
                     input_values=[np.asarray([[0, 2**63 + 5, 2**64 - 1, 7], [2**63, 1, 2**63 - 1, 2**62]], np.uint64)]),
            Testcase("sort_uint64_with_payload", lambda x: lax.sort((x, jnp.broadcast_to(jnp.arange(4), x.shape)), num_keys=1)[1],
                     input_values=[np.asarray([[0, 2**63 + 5, 2**64 - 1, 7], [2**63, 1, 2**63 - 1, 2**62]], np.uint64)]),
            Testcase("top_k_int32_ties", lambda x: lax.top_k(x, 4), [spec("B", 7)], input_generator=_small_ints,
                     expected_ops=["TopK"]),
            Testcase("top_k_uint16", lambda x: lax.top_k(x, 2), [spec("B", 5, dtype=jnp.uint16)], expected_ops=["TopK"]),
            Testcase("top_k_nan", lambda x: lax.top_k(x, 5), [], input_values=[_NAN_INPUT]),
        ],
    ),
]

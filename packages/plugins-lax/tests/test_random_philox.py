"""XLA's CPU rng_bit_generator stream, as random_philox.py reproduces it: the layout measured once
is checked against jax.lax.rng_bit_generator (XLA on CPU) for states whose counters carry, and the
algorithms it does not reproduce are declined with the reason."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax2onnx import LoweringError, to_onnx
from jax2onnx_lax import random_philox

STATES = [
    [1, 2, 3, 4],
    [7, 0xFFFFFFFF, 0xFFFFFFFE, 3],  # carry from the low word into the high word
    [0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF],  # carry out of the low 64 bits
    [0, 0, 0, 0],
]


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize(("shape", "dtype"), [((1,), jnp.uint32), ((9,), jnp.uint32), ((2, 3), jnp.uint8),
                                              ((5,), jnp.uint16)])
def test_the_stream_is_xlas(state, shape, dtype):
    key = jnp.asarray(state, jnp.uint32)
    want_state, want = lax.rng_bit_generator(key, shape, dtype=dtype)  # XLA's own, on CPU
    got_state, got = jax.jit(lambda k: random_philox.rng_bit_generator(k, shape, dtype))(key)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    np.testing.assert_array_equal(np.asarray(got_state), np.asarray(want_state))


def test_three_fry_is_declined_with_the_reason():
    def fn(key):
        return lax.rng_bit_generator(key, (4,), algorithm=lax.RandomAlgorithm.RNG_THREE_FRY)[1]

    with pytest.raises(LoweringError, match="RNG_THREE_FRY.*only XLA's CPU default"):
        to_onnx(fn, [jax.ShapeDtypeStruct((4,), jnp.uint32)])


def test_rng_uniform_is_declined_with_the_reason():
    with pytest.raises(LoweringError, match="stateful generator.*jax.random"):
        to_onnx(lambda x: lax.rng_uniform(0.0, 1.0, (3,)) + x, [(3,)])

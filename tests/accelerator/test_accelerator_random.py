"""jax.random in the graph, exported on a TPU or GPU host: threefry is platform independent by
design, so the key's bits on the accelerator equal the CPU's and the ONNX model's, bit for bit."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from accelerator_models import BACKEND, assert_float32_close, normal, requires_accelerator
from jax2onnx import to_onnx
from jax2onnx.verification.compare import run_onnx

pytestmark = requires_accelerator

KEY = jax.ShapeDtypeStruct((2,), jnp.uint32)


def draws(key, x):
    k1, k2 = jax.random.split(key)
    return jax.random.bits(k1, x.shape), jax.random.uniform(k2, x.shape), x + jax.random.normal(k2, x.shape)


def test_random_bits_match_jax_on_the_accelerator_bit_for_bit():
    model = to_onnx(draws, [KEY, (4, 16)], verify=True)
    key, x = np.array([0, 42], np.uint32), normal((4, 16))
    on_device = jax.jit(draws)(key, x)
    assert {d.platform for d in on_device[0].devices()} == {BACKEND}
    bits, uniform, noisy = (np.asarray(a) for a in on_device)
    got = run_onnx(model, [key, x])
    np.testing.assert_array_equal(got[0], bits)
    np.testing.assert_array_equal(got[1], uniform)  # bits to [0, 1) by exponent and one subtraction
    assert_float32_close(got[2], noisy)  # erf_inv: float arithmetic per device


def test_the_accelerators_threefry_bits_are_the_cpus():
    try:
        cpu = jax.devices("cpu")[0]
    except RuntimeError:
        pytest.skip("JAX's CPU backend is not enabled here (JAX_PLATFORMS names only the accelerator)")
    key, x = np.array([7, 2**31 + 5], np.uint32), normal((4, 16))
    on_device = [np.asarray(a) for a in jax.jit(draws)(key, x)]
    on_cpu = [np.asarray(a) for a in jax.jit(draws)(jax.device_put(key, cpu), jax.device_put(x, cpu))]
    np.testing.assert_array_equal(on_device[0], on_cpu[0])  # threefry: the same bits on every platform
    np.testing.assert_array_equal(on_device[1], on_cpu[1])

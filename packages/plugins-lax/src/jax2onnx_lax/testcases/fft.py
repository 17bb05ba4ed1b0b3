"""Testcases of :mod:`jax2onnx_lax.fft` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax.numpy as jnp
from jax import lax
from jax2onnx.testing import Component, Testcase


def _parts(z):
    return jnp.real(z), jnp.imag(z)


def power_spectrum(x):
    spec = jnp.fft.rfft(x)
    return jnp.real(spec) ** 2 + jnp.imag(spec) ** 2


components = [
    Component(
        name="lax.fft",
        onnx=["DFT"],
        since="v0.1.0",
        testcases=[
            Testcase("fft_1d", lambda x, y: _parts(jnp.fft.fft(lax.complex(x, y))), [("B", 6), ("B", 6)],
                     expected_ops=["DFT"]),
            Testcase("ifft_1d", lambda x, y: _parts(jnp.fft.ifft(lax.complex(x, y))), [("B", 5), ("B", 5)],
                     expected_ops=["DFT"]),
            Testcase("fft_2d", lambda x, y: _parts(jnp.fft.fft2(lax.complex(x, y))), [("B", 4, 3), ("B", 4, 3)],
                     expected_ops=["DFT"]),
            Testcase("ifft_3d", lambda x, y: _parts(jnp.fft.ifftn(lax.complex(x, y), axes=(-3, -2, -1))),
                     [("B", 2, 3, 4), ("B", 2, 3, 4)], expected_ops=["DFT"]),
            Testcase("rfft_1d", lambda x: _parts(jnp.fft.rfft(x)), [("B", 7)], expected_ops=["DFT"]),
            Testcase("rfft_2d", lambda x: _parts(jnp.fft.rfft2(x)), [("B", 3, 6)], expected_ops=["DFT"]),
            Testcase("rfft_power_spectrum", power_spectrum, [("B", 8)], expected_ops=["DFT"]),
            Testcase("irfft_roundtrip", lambda x: jnp.fft.irfft(jnp.fft.rfft(x)), [("B", 6)], expected_ops=["DFT"]),
            Testcase("irfft_1d", lambda x, y: jnp.fft.irfft(lax.complex(x, y)), [("B", 4), ("B", 4)],
                     expected_ops=["DFT"]),
            Testcase("irfft_2d", lambda x, y: jnp.fft.irfft2(lax.complex(x, y)), [("B", 3, 4), ("B", 3, 4)],
                     expected_ops=["DFT"]),
        ],
    ),
    Component(
        name="lax.complex",
        onnx=["Unsqueeze", "Concat"],
        since="v0.1.0",
        testcases=[
            Testcase("complex_real_imag", lambda x, y: _parts(lax.complex(x, y)),
                     [("B", 3), ("B", 3)], expected_ops=["Concat"]),
            Testcase("complex_scalar_imag", lambda x: _parts(lax.complex(x, jnp.zeros((), x.dtype))), [("B", 3)],
                     expected_ops=["Concat"]),
        ],
    ),
    Component(
        name="lax.conj",
        onnx=["Mul"],
        since="v0.1.0",
        testcases=[
            Testcase("conj", lambda x, y: jnp.imag(jnp.conj(lax.complex(x, y))), [("B", 3), ("B", 3)],
                     expected_ops=["Mul"]),
            Testcase("conj_of_real", lambda x: _parts(lax.conj(x)), [("B", 3)], expected_ops=["Pad"]),
        ],
    ),
    Component(
        name="lax.real",
        onnx=["Gather"],
        since="v0.1.0",
        testcases=[Testcase("real_of_spectrum", lambda x: jnp.real(jnp.fft.rfft(x)), [("B", 4)],
                            expected_ops=["Gather"])],
    ),
    Component(
        name="lax.imag",
        onnx=["Gather"],
        since="v0.1.0",
        testcases=[Testcase("imag_of_spectrum", lambda x: jnp.imag(jnp.fft.rfft(x)), [("B", 4)],
                            expected_ops=["Gather"])],
    ),
]

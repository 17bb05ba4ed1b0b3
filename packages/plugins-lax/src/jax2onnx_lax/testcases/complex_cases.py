"""Testcases for complex values through the lax lowerings (no lowerings here): arithmetic, shape
ops and dot_general on (real, imag) pairs, and the FFT-based physics they serve.

ONNX graph inputs and outputs cannot be complex, so every case takes real arrays (building complex
ones with ``lax.complex`` or an FFT) and returns real ones (``.real``/``.imag``/``abs``).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ._testdata import uniform
from .physics_cases import physics_example


def _z(x, y):
    return lax.complex(x, y)


def _complex():
    """complex64, or complex128 in the double-precision variants (evaluated while tracing)."""
    return jax.dtypes.canonicalize_dtype(jnp.complex128)


def _parts(z):
    return jnp.real(z), jnp.imag(z)


def _idx(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


# The jnp pack's library lowerings of jnp.pad / jnp.take / jnp.einsum decline complex operands (their
# fused ops are real-valued), so these cases test the lax lowerings of their equations.
_pad, _take, _einsum = jnp.pad, jnp.take, jnp.einsum

_PAIR = [("B", 4), ("B", 4)]
_TWO_PAIRS = [("B", 4)] * 4


def _indices_in(lo, hi):
    def gen(rng, shape, dtype):
        if np.dtype(dtype).kind in "iu":
            return rng.integers(lo, hi, size=shape)
        return rng.standard_normal(shape)

    return gen


# ---------------------------------------------------------------------------------------------
# physics


def fft_magnitude(x):
    return jnp.abs(jnp.fft.fft(x))


def gaussian_lowpass(x):
    """Smooth a periodic signal: multiply its spectrum by a Gaussian in frequency (fftfreq), invert."""
    k = jnp.fft.fftfreq(x.shape[-1])
    return jnp.fft.ifft(jnp.fft.fft(x) * jnp.exp(-20.0 * k**2)).real


def spectral_derivative(u):
    """du/dx of a function sampled at N points of [0, 2pi): irfft(i k rfft(u)), k = 0..N/2."""
    n = u.shape[-1]
    k = jnp.fft.rfftfreq(n, d=1.0 / n)
    return jnp.fft.irfft(1j * k * jnp.fft.rfft(u), n=n)


def smooth_periodic(rng, shape, dtype):
    """A few random Fourier modes of [0, 2pi) on the last axis: what spectral methods differentiate."""
    t = np.arange(shape[-1]) * 2 * np.pi / shape[-1]
    lead = shape[:-1]
    out = np.zeros(shape)
    for m in (1, 2, 3):
        a, b = rng.standard_normal(lead + (1,)), rng.standard_normal(lead + (1,))
        out += a * np.cos(m * t) + b * np.sin(m * t)
    return out


def parseval(x):
    """Energy in time and in frequency: sum |x|^2 and sum |fft(x)|^2 / N agree (Parseval)."""
    n = x.shape[-1]
    return jnp.sum(x * x, axis=-1), jnp.sum(jnp.abs(jnp.fft.fft(x)) ** 2, axis=-1) / n


def spectra_dot(x, y):
    """The complex inner product of two spectra (no conjugate, jnp.dot), its real part."""
    return jnp.dot(jnp.fft.fft(x), jnp.fft.fft(y)).real


def zero_padded_rfft(x):
    return _parts(jnp.fft.rfft(x, n=12))


def circular_convolution(x, y):
    """Periodic convolution by the convolution theorem (a complex product of two spectra)."""
    return jnp.fft.irfft(jnp.fft.rfft(x) * jnp.fft.rfft(y), n=x.shape[-1])


# ---------------------------------------------------------------------------------------------

components = [
    Component(
        name="lax.complex_arith",
        onnx=["Split", "Mul", "Sub", "Add", "Div", "Concat", "Sqrt", "Where"],
        since="v0.7.0",
        description="add/sub/neg/mul/div/square/integer_pow/abs/sign/exp/eq/ne of complex values as (real, imag) "
                    "pairs; abs is hypot-like (no overflow of re^2 + im^2)",
        testcases=[
            Testcase("complex_abs_of_fft", fft_magnitude, [("B", 8)], expected_ops=["DFT", "Sqrt"]),
            Testcase("complex_abs_no_overflow", lambda x, y: jnp.abs(_z(x * 1e20, y * 1e20)) * 1e-20, _PAIR,
                     expected_ops=["Sqrt"]),
            Testcase("complex_abs_special", lambda x, y: jnp.abs(_z(x, y)),
                     input_values=[np.array([0.0, 3.0, np.inf, -np.inf, 0.0, 1e-30], np.float32),
                                   np.array([0.0, -4.0, np.inf, 1.0, -2.0, 1e-30], np.float32)]),
            Testcase("complex_add_sub_neg", lambda a, b, c, d: _parts(-(_z(a, b) + _z(c, d)) - _z(c, a)), _TWO_PAIRS,
                     expected_ops=["Add", "Sub", "Neg"]),
            Testcase("complex_mul", lambda a, b, c, d: _parts(_z(a, b) * _z(c, d)), _TWO_PAIRS, expected_ops=["Mul"]),
            # x is real: jnp converts it to complex (zero imaginary part) first
            Testcase("complex_mul_real", lambda a, b, x: _parts(_z(a, b) * x), [("B", 4)] * 3,
                     expected_ops=["Pad", "Mul"]),
            Testcase("complex_mul_literal", lambda a, b: _parts((2.0 - 3.0j) * _z(a, b) + 1j), _PAIR,
                     expected_ops=["Mul"]),
            Testcase("complex_div", lambda a, b, c, d: _parts(_z(a, b) / _z(c, d)), _TWO_PAIRS, expected_ops=["Div"]),
            Testcase("complex_div_large", lambda a, b, c, d: _parts(_z(a, b) / _z(c * 1e30, d * 1e30)), _TWO_PAIRS,
                     rtol=1e-4, atol=1e-35, atol_f64=1e-40),
            Testcase("complex_square", lambda a, b: _parts(lax.square(_z(a, b))), _PAIR, expected_ops=["Mul"]),
            Testcase("complex_integer_pow", lambda a, b: _parts(lax.integer_pow(_z(a, b), 5)), _PAIR,
                     expected_ops=["Mul"]),
            Testcase("complex_integer_pow_negative", lambda a, b: _parts(lax.integer_pow(_z(a, b), -2)), _PAIR,
                     input_generator=uniform(0.5, 2.0), expected_ops=["Div"]),
            Testcase("complex_integer_pow_zero", lambda a, b: _parts(lax.integer_pow(_z(a, b), 0)), _PAIR),
            Testcase("complex_exp", lambda a, b: _parts(jnp.exp(_z(a, b))), _PAIR,
                     expected_ops=["Exp", "Cos", "Sin"]),
            Testcase("complex_sign", lambda a, b: _parts(jnp.sign(_z(a, b))), _PAIR, expected_ops=["Div", "Where"]),
            Testcase("complex_sign_zero", lambda a, b: _parts(lax.sign(_z(a, b))),
                     input_values=[np.array([0.0, 3.0, -0.0], np.float32), np.array([0.0, 4.0, 2.0], np.float32)]),
            Testcase("complex_eq_ne", lambda a, b, c, d: (_z(a, b) == _z(c, b), _z(a, b) != _z(a, d)),
                     input_values=[np.array([1.0, 2.0, np.nan, 4.0], np.float32),
                                   np.array([1.0, 5.0, 0.0, np.nan], np.float32),
                                   np.array([1.0, 2.0, np.nan, 3.0], np.float32),
                                   np.array([1.0, 6.0, 0.0, np.nan], np.float32)],
                     expected_ops=["Equal", "ReduceMin", "Not"]),
        ],
    ),
    Component(
        name="lax.complex_convert",
        onnx=["Pad", "Gather", "Cast"],
        since="v0.7.0",
        description="convert_element_type to complex (zero imaginary part), complex to real (the real part, as "
                    "JAX does), to int and to bool",
        testcases=[
            Testcase("complex_from_real", lambda x: _parts(x.astype(_complex())), [("B", 4)], expected_ops=["Pad"]),
            Testcase("complex_from_int", lambda n: _parts(n.astype(_complex())), [_idx("B", 3)],
                     expected_ops=["Cast", "Pad"]),
            Testcase("complex_to_real", lambda a, b: lax.convert_element_type(_z(a, b), a.dtype), _PAIR,
                     expected_ops=["Gather"]),
            Testcase("complex_to_int32", lambda a, b: lax.convert_element_type(_z(a * 5, b), jnp.int32), _PAIR),
            Testcase("complex_to_bool", lambda a, b: lax.convert_element_type(_z(a, b), jnp.bool_),
                     input_values=[np.array([0.0, 1.0, 0.0, -0.0, np.nan], np.float32),
                                   np.array([0.0, 0.0, 2.0, 0.0, 0.0], np.float32)]),
            # complex64 -> complex128 -> complex64 (the double variant only widens and narrows)
            Testcase("complex_widen_narrow", lambda a, b: _parts(_z(a, b).astype(jnp.complex128).astype(jnp.complex64)),
                     _PAIR, run_f64=False),  # complex128 needs x64: the float32 variant has it as complex64
        ],
    ),
    Component(
        name="lax.complex_shape",
        onnx=["Reshape", "Expand", "Transpose", "Concat", "Slice", "Pad", "Gather", "Where", "ReduceSum"],
        since="v0.7.0",
        description="shape, slicing, gather, select_n and sums of complex values: the pair axis stays last",
        testcases=[
            Testcase("complex_reshape", lambda a, b: _parts(_z(a, b).reshape(a.shape[0], 2, 3)), [("B", 6)] * 2,
                     expected_ops=["Reshape"]),
            Testcase("complex_broadcast_in_dim", lambda a, b: _parts(jnp.broadcast_to(_z(a, b)[:, None, :],
                                                                                      (a.shape[0], 3, 4))), _PAIR,
                     expected_ops=["Expand"]),
            Testcase("complex_broadcast_scalar", lambda a: _parts(jnp.full(a.shape, 1.0 + 2.0j) * a), [("B", 3)]),
            Testcase("complex_transpose", lambda a, b: _parts(_z(a, b).T), [("B", 3)] * 2, expected_ops=["Transpose"]),
            Testcase("complex_squeeze_expand", lambda a, b: _parts(jnp.squeeze(_z(a, b)[:, None], 1)[None]),
                     _PAIR),
            Testcase("complex_concatenate", lambda a, b: _parts(jnp.concatenate([_z(a, b), _z(b, a)], axis=1)),
                     _PAIR, expected_ops=["Concat"]),
            Testcase("complex_slice_rev", lambda a, b: _parts(_z(a, b)[:, 1:3][:, ::-1]), _PAIR,
                     expected_ops=["Slice"]),
            Testcase("complex_dynamic_slice", lambda a, b, i: _parts(lax.dynamic_slice_in_dim(_z(a, b), i, 2, 1)),
                     [("B", 5), ("B", 5), _idx()], input_generator=_indices_in(-2, 6), expected_ops=["Slice"]),
            Testcase("complex_dynamic_update_slice",
                     lambda a, b, i: _parts(lax.dynamic_update_slice_in_dim(_z(a, b), _z(b, a)[:, :2] * 1j, i, 1)),
                     [("B", 5), ("B", 5), _idx()], input_generator=_indices_in(-2, 6), expected_ops=["Concat"]),
            Testcase("complex_pad_zero", lambda a, b: _parts(_pad(_z(a, b), ((0, 0), (1, 2)))), _PAIR,
                     expected_ops=["Pad"]),
            Testcase("complex_pad_value", lambda a, b: _parts(lax.pad(_z(a, b), jnp.asarray(1.0 - 2.0j, _complex()),
                                                                      ((0, 0, 0), (2, -1, 1)))), _PAIR,
                     expected_ops=["Pad"]),
            Testcase("complex_gather", lambda a, b, i: _parts(_z(a, b)[:, i]), [("B", 5), ("B", 5), _idx(3)],
                     input_generator=_indices_in(0, 5), expected_ops=["Gather"]),
            Testcase("complex_take_fill", lambda a, b, i: _parts(_take(_z(a, b), i, axis=0)),
                     [(5, "B"), (5, "B"), _idx(4)], input_generator=_indices_in(-7, 7), expected_ops=["Where"]),
            Testcase("complex_scatter_set", lambda a, b, i: _parts(_z(a, b).at[:, i].set(2.0 - 1.0j)),
                     [("B", 5), ("B", 5), _idx(2)], input_generator=_indices_in(0, 5), expected_ops=["ScatterND"]),
            Testcase("complex_scatter_add", lambda a, b, c, d, i: _parts(_z(a, b).at[i].add(_z(c, d))),
                     [("B", 3), ("B", 3), (2, 3), (2, 3), _idx(2)], input_generator=_indices_in(-4, 4),
                     expected_ops=["ScatterND"]),
            Testcase("complex_where", lambda a, b: _parts(jnp.where(a > 0, _z(a, b), 0.5j)), _PAIR,
                     expected_ops=["Where"]),
            Testcase("complex_reduce_sum", lambda a, b: _parts(jnp.sum(_z(a, b), axis=1)), _PAIR,
                     expected_ops=["ReduceSum"]),
            Testcase("complex_cumsum", lambda a, b: _parts(jnp.cumsum(_z(a, b), axis=1)), _PAIR,
                     expected_ops=["CumSum"]),
        ],
    ),
    Component(
        name="lax.complex_dot",
        onnx=["MatMul", "Sub", "Add"],
        since="v0.7.0",
        description="dot_general of complex values: four real products (AC - BD) + (AD + BC)i",
        testcases=[
            Testcase("complex_dot_spectra", spectra_dot, [(8,), (8,)], expected_ops=["DFT", "MatMul"]),
            Testcase("complex_matmul", lambda a, b, c, d: _parts(_z(a, b) @ _z(c, d)), [("B", 3), ("B", 3), (3, 2),
                                                                                     (3, 2)],
                     expected_ops=["MatMul"]),
            Testcase("complex_batched_matmul", lambda a, b, c, d: _parts(_einsum("bij,bjk->bik", _z(a, b), _z(c, d))),
                     [("B", 2, 3), ("B", 2, 3), ("B", 3, 4), ("B", 3, 4)], expected_ops=["MatMul"]),
            # lax.dot_general takes a complex and a real operand as they are: two real products
            Testcase("complex_dot_real_weight",
                     lambda a, b, w: _parts(lax.dot_general(_z(a, b), w, (((1,), (0,)), ((), ())))),
                     [("B", 3), ("B", 3), (3, 2)], expected_ops=["MatMul"]),
            Testcase("complex_dot_real_operands_complex_result",
                     lambda x, w: _parts(lax.dot_general(x, w, (((1,), (0,)), ((), ())), preferred_element_type=_complex())),
                     [("B", 3), (3, 2)], expected_ops=["MatMul", "Pad"]),
        ],
    ),
    physics_example("spectral_filter", gaussian_lowpass, [("B", 8)], onnx=["DFT", "Mul"], since="v0.7.0",
                    description="ifft(fft(x) * exp(-20 k^2)).real with k from jnp.fft.fftfreq: a Gaussian low-pass",
                    expected_ops=["DFT"]),
    physics_example("spectral_derivative", spectral_derivative, [("B", 16)], onnx=["DFT", "Mul"], since="v0.7.0",
                    description="du/dx = irfft(1j * k * rfft(u)) of a periodic function (k from jnp.fft.rfftfreq)",
                    input_generator=smooth_periodic, expected_ops=["DFT"], more=[
                        Testcase("physics_circular_convolution", circular_convolution, [("B", 8), ("B", 8)],
                                 expected_ops=["DFT", "Mul"]),
                        Testcase("physics_zero_padded_rfft", zero_padded_rfft, [("B", 8)], expected_ops=["Pad", "DFT"]),
                    ]),
    physics_example("parseval", parseval, [("B", 8)], onnx=["DFT", "ReduceSum"], since="v0.7.0",
                    description="sum |x|^2 and sum |fft(x)|^2 / N (Parseval's theorem)",
                    expected_ops=["DFT", "ReduceSum"], more=[
                        # reverse mode through rfft, abs and conj: JAX's transpose of rfft is an irfft of complex
                        # cotangents
                        Testcase("physics_spectral_energy_grad",
                                 jax.grad(lambda x: jnp.sum(jnp.abs(jnp.fft.rfft(x)) ** 2)), [(8,)],
                                 expected_ops=["DFT"]),
                    ]),
]

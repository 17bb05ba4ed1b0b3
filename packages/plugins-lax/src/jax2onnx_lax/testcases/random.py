"""Testcases of :mod:`jax2onnx_lax.random` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.dtypes import U32
from jax2onnx.testing import Component, Testcase

from ..random_float_kernels import ulp_tolerance

_EXACT = {"rtol": 0.0, "atol": 0.0, "rtol_f64": 0.0, "atol_f64": 0.0}


#: normal: bitwise in float32 (default compile); max 3 ulps (2 eps relative) against -O0 and in float64.
_NORMAL = ulp_tolerance(4, 4)


#: exponential: -log1p(-u) through the compensated log1p (XLA's log1p kernel is only erf_inv's, see
#: random_float_kernels): max 3 ulps (float32), 128 ulps = 2.7e-14 relative (float64).
_EXPONENTIAL = ulp_tolerance(4, 128)


#: uniform on [-2, 3): u * 5 - 2 with XLA's FMA vs a rounded product: max |diff| 2**-22 (float32),
#: 2**-51 (float64), where the result cancels to near 0; allowed: 1 ulp of the product (< 5).
_UNIFORM = ulp_tolerance(1, 1, atol=2.0**-21, atol_f64=2.0**-50)


#: gumbel: -log(-log u) with onnxruntime's Log: max |diff| 2**-20 (float32), 2**-49 (float64) where it
#: crosses 0; 4 ulps elsewhere.
_LOG_CANCELS = ulp_tolerance(4, 4, atol=2.0**-20, atol_f64=2.0**-49)


#: laplace/logistic: log1p(-|u|), log(u) - log1p(-u): max |diff| 2**-20 (float32), 1.4e-14 (float64)
#: where they cross 0; 4 / 128 ulps elsewhere (as exponential).
_LAPLACE_LOGISTIC = ulp_tolerance(4, 128, atol=2.0**-20, atol_f64=2.0**-45)


#: truncated_normal (erf, uniform's FMA, erf_inv): max |diff| 7.2e-7 (float32), 2**-48 (float64).
_TRUNCATED = ulp_tolerance(4, 4, atol=2.0**-20, atol_f64=2.0**-47)


#: gamma/beta/dirichlet (log, exp, pow in a rejection loop): max 6.0e-6 relative = 50 ulps (float32),
#: 9.6e-15 = 43 ulps (float64), under either compilation.
_GAMMA = ulp_tolerance(64, 64)


#: multivariate_normal (cholesky, matmul, normal): float32 bitwise (default compile, 300 keys), 16 ulps
#: (1.1e-6 relative) against -O0; float64 8 ulps; |diff| up to 2**-22 / 2**-50 where mean + L z
#: cancels to near 0.
_MVN = ulp_tolerance(16, 16, atol=2.0**-21, atol_f64=2.0**-49)


KEY_DATA = jax.ShapeDtypeStruct((2,), jnp.uint32)


SEED = jax.ShapeDtypeStruct((), jnp.int32)


def keys_and_normals(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Key data over the full uint32 range; floats standard normal."""
    if np.dtype(dtype) == U32:
        return rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 2**31 - 1, size=shape)
    return rng.standard_normal(shape)


def _case(name: str, fn: Callable[..., Any], shapes: Sequence[Any], *, tol: dict[str, float] | None = None,
          **kw: Any) -> Testcase:
    return Testcase(name, fn, shapes, input_generator=kw.pop("input_generator", keys_and_normals),
                    **(tol if tol is not None else _EXACT), **kw)


def _sampler(name: str, fn: Callable[..., Any], shapes: Sequence[Any], **kw: Any) -> Testcase:
    """A sampler's symbolic variant (two batch sizes) covers its static one: the bits testcases check
    static shapes, so samplers skip them to keep the default session short."""
    return _case(name, fn, shapes, run_static=False, **kw)


def _bits(key, x):
    return jax.random.bits(key, x.shape)


def _bits_uint8(key, x):
    return jax.random.bits(key, x.shape, jnp.uint8)


def _bits_typed(key, x):
    return jax.random.bits(jax.random.wrap_key_data(key), (2, *x.shape))


def _split_fold(key):
    k = jax.random.wrap_key_data(key)
    a, b = jax.random.split(k)
    return jax.random.key_data(jax.random.split(a, 3)), jax.random.key_data(jax.random.fold_in(b, 7))


def _split_legacy(key):
    return jax.random.split(key, 4)


def _fold_in_traced(key, n):
    return jax.random.key_data(jax.random.fold_in(jax.random.wrap_key_data(key), n))


def _seeded(seed, x):
    return jax.random.bits(jax.random.key(seed), x.shape)


def _seeded_legacy(seed, x):
    return jax.random.randint(jax.random.PRNGKey(seed), x.shape, -100, 100)


def _closed_over_key():
    """A typed key held by the function (a module's rng stream): a constant of its key data."""
    key = jax.random.key(1234)

    def fn(x):
        k1, k2 = jax.random.split(key)
        return jax.random.bits(k1, x.shape), jax.random.key_data(k2)

    return fn


def _vmapped_keys(key, x):
    keys = jax.random.split(jax.random.wrap_key_data(key), 3)
    return jax.vmap(lambda k: jax.random.bits(k, x.shape))(keys)


def _select_keys(key, x):
    k = jax.random.wrap_key_data(key)
    keys = jax.random.split(k, 4)
    picked = jnp.where(jnp.array([True, False, True, False]), keys, keys[::-1])
    return jax.vmap(jax.vmap(lambda k: jax.random.bits(k, x.shape)))(picked.reshape(2, 2))


def _uniform_unit(key, x):
    return jax.random.uniform(key, x.shape, x.dtype)


def _uniform(key, x):
    return jax.random.uniform(key, x.shape, x.dtype, -2.0, 3.0)


def _normal(key, x):
    return jax.random.normal(key, x.shape, x.dtype)


def _bernoulli(key, x):
    return jax.random.bernoulli(key, jax.nn.sigmoid(x))


def _categorical(key, logits):
    return jax.random.categorical(key, logits)


def _gumbel(key, x):
    return jax.random.gumbel(key, x.shape, x.dtype)


def _truncated_normal(key, x):
    return jax.random.truncated_normal(key, -1.5, 2.0, x.shape, x.dtype)


def _randint(key, x):
    return jax.random.randint(key, x.shape, -7, 1000)


def _permutation(key):
    return jax.random.permutation(key, 10)


def _permutation_rows(key, x):
    return jax.random.permutation(key, x, axis=0)


def _choice(key, x):
    return jax.random.choice(key, x, (3,), replace=False)


def _choice_weighted(key, x):
    return jax.random.choice(key, 6, (4,), p=jax.nn.softmax(x))


def _exponential(key, x):
    return jax.random.exponential(key, x.shape, x.dtype)


def _laplace_logistic(key, x):
    a, b = jax.random.split(key)
    return jax.random.laplace(a, x.shape, x.dtype), jax.random.logistic(b, x.shape, x.dtype)


def _gamma(key, x):
    return jax.random.gamma(key, 0.5 + jnp.abs(x))


def _beta(key, x):
    return jax.random.beta(key, 1.0 + jnp.abs(x), 2.0)


def _dirichlet(key, x):
    return jax.random.dirichlet(key, 0.5 + jnp.abs(x))


def _poisson(key, x):
    return jax.random.poisson(key, 0.5 + 20.0 * jax.nn.sigmoid(x))  # both of JAX's regimes (rate < 10, >= 10)


def _binomial(key, x):
    return jax.random.binomial(key, 12.0, jax.nn.sigmoid(x))


def _multivariate_normal(key, x):
    cov = jnp.eye(x.shape[1], dtype=x.dtype) + 0.5
    return jax.random.multivariate_normal(key, x[0], cov, (4,))


def _sample_tokens(key, logits0):
    """Autoregressive sampling: each step splits the key, draws a token, feeds it back."""
    table = jnp.sin(jnp.arange(5 * 5, dtype=logits0.dtype).reshape(5, 5))

    def step(carry, _):
        k, logits = carry
        k, sub = jax.random.split(k)
        token = jax.random.categorical(sub, logits)
        return (k, logits + table[token]), token

    (_, _), tokens = lax.scan(step, (jax.random.wrap_key_data(key), logits0), None, length=6)
    return tokens


RBG_STATE = jax.ShapeDtypeStruct((4,), jnp.uint32)
#: a state whose 64-bit counter wraps inside the stream (carry from the low into the high word)
_WRAPPING_STATE = np.array([7, 0xFFFFFFFF, 0xFFFFFFFE, 0xFFFFFFFF], np.uint32)


def _rbg_bits(dtype):
    def fn(state, x):
        new_state, bits = lax.rng_bit_generator(state, (3, 5), dtype=dtype)
        return new_state, bits, x * 2.0

    return fn


def _rbg_bits_wide(state):
    # uint64 words (two Philox words each) in the double-precision variant, uint32 in float32.
    return lax.rng_bit_generator(state, (6,), dtype=jax.dtypes.canonicalize_dtype(jnp.uint64))


def _rbg_samplers(key_data, x):
    key = jax.random.wrap_key_data(key_data, impl="unsafe_rbg")
    k1, k2 = jax.random.split(key)
    return jax.random.uniform(k1, (4, 3), x.dtype) + x, jax.random.normal(k2, (5,), x.dtype)  # x: (4, 3)


components = [
    Component(
        name="jax.random.bits",
        onnx=["Add", "Mul", "BitShift", "BitwiseXor"],
        since="v0.13.0",
        description="random_bits / threefry2x32 / iota_2x32_shape: JAX's threefry stream, bit for bit",
        testcases=[
            _case("random_bits_key_input", _bits, [KEY_DATA, ("B", 3)], expected_ops=["BitShift", "BitwiseXor"]),
            _case("random_bits_uint8", _bits_uint8, [KEY_DATA, ("B", 5)]),
            _case("random_bits_typed_key", _bits_typed, [KEY_DATA, (3, "B")]),
            _case("random_bits_seed_input", _seeded, [SEED, ("B", 2)]),
            _case("random_bits_closed_over_key", None, [("B", 2)], factory=_closed_over_key),
            _case("random_bits_vmapped_keys", _vmapped_keys, [KEY_DATA, ("B",)]),
            _case("random_bits_selected_keys", _select_keys, [KEY_DATA, (2,)]),
        ],
    ),
    Component(
        name="jax.random.split",
        onnx=["BitShift", "BitwiseXor"],
        since="v0.13.0",
        description="random_split / random_fold_in on typed and raw keys",
        testcases=[
            _case("random_split_fold_in", _split_fold, [KEY_DATA]),
            _case("random_split_legacy", _split_legacy, [KEY_DATA]),
            _case("random_fold_in_traced", _fold_in_traced, [KEY_DATA, SEED]),
            _case("random_randint_seed_legacy", _seeded_legacy, [SEED, ("B",)]),
        ],
    ),
    Component(
        name="jax.random.samplers",
        onnx=["BitShift", "BitwiseXor"],
        since="v0.13.0",
        description="samplers built on random_bits, matching JAX's draws",
        testcases=[
            _sampler("random_uniform_unit", _uniform_unit, [KEY_DATA, ("B", 3)]),
            _sampler("random_uniform", _uniform, [KEY_DATA, ("B", 3)], tol=_UNIFORM),
            _sampler("random_normal", _normal, [KEY_DATA, ("B", 3)], tol=_NORMAL),
            _sampler("random_bernoulli", _bernoulli, [KEY_DATA, ("B", 4)]),
            _sampler("random_categorical", _categorical, [KEY_DATA, ("B", 5)]),
            _sampler("random_gumbel", _gumbel, [KEY_DATA, ("B", 3)], tol=_LOG_CANCELS),
            _sampler("random_truncated_normal", _truncated_normal, [KEY_DATA, ("B", 3)], tol=_TRUNCATED),
            _sampler("random_randint", _randint, [KEY_DATA, ("B", 3)]),
            _sampler("random_permutation", _permutation, [KEY_DATA]),
            _sampler("random_permutation_rows", _permutation_rows, [KEY_DATA, (6, 2)]),
            _sampler("random_choice_without_replacement", _choice, [KEY_DATA, (7,)]),
            _sampler("random_choice_weighted", _choice_weighted, [KEY_DATA, (6,)]),
            _sampler("random_exponential", _exponential, [KEY_DATA, ("B", 3)], tol=_EXPONENTIAL),
            _sampler("random_laplace_logistic", _laplace_logistic, [KEY_DATA, ("B", 3)], tol=_LAPLACE_LOGISTIC),
            _sampler("random_gamma", _gamma, [KEY_DATA, ("B", 3)], tol=_GAMMA),
            _sampler("random_beta", _beta, [KEY_DATA, ("B", 2)], tol=_GAMMA),
            _sampler("random_dirichlet", _dirichlet, [KEY_DATA, (2, 3)], tol=_GAMMA),
            _sampler("random_poisson", _poisson, [KEY_DATA, ("B", 3)]),
            _sampler("random_binomial", _binomial, [KEY_DATA, ("B", 3)]),
            _sampler("random_multivariate_normal", _multivariate_normal, [KEY_DATA, (2, 3)], tol=_MVN),
            _sampler("random_categorical_scan_sampler", _sample_tokens, [KEY_DATA, (5,)], expected_ops=["Loop"]),
        ],
    ),
    Component(
        name="lax.rng_bit_generator",
        onnx=["Mul", "Add", "BitwiseXor", "BitShift"],
        since="v0.1.0",
        description="XLA's CPU stream (Philox-4x32-10) of the rbg key impls, bit for bit",
        testcases=[
            _case("rng_bit_generator_uint32", _rbg_bits(jnp.uint32), [RBG_STATE, ("B", 2)]),
            _case("rng_bit_generator_uint8", _rbg_bits(jnp.uint8), [RBG_STATE, ("B", 2)]),
            _case("rng_bit_generator_uint16", _rbg_bits(jnp.uint16), [RBG_STATE, ("B", 2)]),
            _case("rng_bit_generator_counter_wraps", _rbg_bits(jnp.uint32), [],
                  input_values=[_WRAPPING_STATE, np.ones((2, 2), np.float32)]),
            _case("rng_bit_generator_wide", _rbg_bits_wide, [RBG_STATE]),
            _case("rbg_key_samplers", _rbg_samplers, [RBG_STATE, (4, 3)], tol=_NORMAL),
        ],
    ),
]

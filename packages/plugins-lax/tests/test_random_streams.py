"""jax.random beyond the default testcases: the other ``jax_threefry_partitionable`` setting, typed
key specs as graph inputs, and keys that differ per inference call.

The testcase module runs the random testcases under JAX's default (partitionable threefry, JAX >=
0.5); here every one of them runs again with the setting off, scoped to the test's thread.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax2onnx import to_onnx
from jax2onnx.testing import run_variant, variants_of
from jax2onnx.verification.compare import run_onnx
from jax2onnx_lax.testcases import random as random_cases

#: Non-partitionable threefry pads its counters to an even number of 32-bit words: a symbolic count
#: of 8-bit draws (5*B bytes) has no known parity, so that export is declined (tested below).
_SYMBOLIC_PARITY = {"random_bits_uint8"}

#: float64 draws use 64-bit random_bits: checked on these; the rest run in float32 to keep this short.
_F64 = {"random_bits_key_input", "random_uniform_unit", "random_normal", "random_gamma"}

_VARIANTS = [
    pytest.param(v, id=f"{comp.name}::{v.id}")
    for comp in random_cases.components
    for case in comp.testcases
    for v in variants_of(case, "jax2onnx-lax", comp.name)
    if (not v.double or case.name in _F64) and not (v.symbolic and case.name in _SYMBOLIC_PARITY)
]


@pytest.mark.parametrize("variant", _VARIANTS)
def test_testcase_not_partitionable(variant):
    with jax.threefry_partitionable(False):
        run_variant(variant)


def _bits(key, x):
    return jax.random.bits(key, x.shape)


@pytest.mark.parametrize("partitionable", [True, False])
def test_setting_at_export_decides_the_stream(partitionable):
    """The two settings give different streams; each export reproduces the one it was made under."""
    key = np.array([17, 2**31 + 5], np.uint32)
    x = np.zeros((4, 5), np.float32)
    with jax.threefry_partitionable(partitionable):
        model = to_onnx(_bits, [jax.ShapeDtypeStruct((2,), jnp.uint32), ("B", 5)])
        expected = np.asarray(_bits(key, x))
    with jax.threefry_partitionable(not partitionable):
        other = np.asarray(_bits(key, x))
    assert not np.array_equal(expected, other)
    np.testing.assert_array_equal(run_onnx(model, [key, x])[0], expected)


def _noisy(key, x):
    k1, k2 = jax.random.split(key)
    return x + jax.random.normal(k1, x.shape, x.dtype), k2


@pytest.mark.parametrize("spec", ["shape_dtype_struct", "key_array"])
def test_typed_key_spec_is_a_key_data_input(spec):
    """A typed key spec becomes a uint32 (2,) input fed with ``jax.random.key_data``; a key returned by
    the function comes back as its key data, so the next call can feed it in again."""
    key_spec = jax.ShapeDtypeStruct((), jax.random.key(0).dtype) if spec == "shape_dtype_struct" else jax.random.key(0)
    model = to_onnx(_noisy, [key_spec, ("B", 3)])
    (key_in, _), (key_out,) = model.graph.input, model.graph.output[1:]
    for value_info in (key_in, key_out):
        tensor = value_info.type.tensor_type
        assert tensor.elem_type == 12  # onnx.TensorProto.UINT32
        assert [d.dim_value for d in tensor.shape.dim] == [2]
    key, x = jax.random.key(7), np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    for _ in range(3):  # chained calls: each feeds the key the previous one returned
        y, next_key = _noisy(key, x)
        got_y, got_key = run_onnx(model, [np.asarray(jax.random.key_data(key)), x])
        np.testing.assert_array_equal(got_key, np.asarray(jax.random.key_data(next_key)))
        np.testing.assert_allclose(got_y, np.asarray(y), rtol=2e-5, atol=2e-6)
        key = next_key


def test_batch_of_keys_input():
    """A batch of typed keys as input (``key<fry>[B]``, fed as uint32 (B, 2)), one draw per key."""
    key_spec = jax.ShapeDtypeStruct(("B",), jax.random.key(0).dtype)

    def draw(keys):
        return jax.vmap(lambda k: jax.random.randint(k, (3,), 0, 1000))(keys)

    model = to_onnx(draw, [key_spec])
    keys = jax.random.split(jax.random.key(3), 5)
    got = run_onnx(model, [np.asarray(jax.random.key_data(keys))])[0]
    np.testing.assert_array_equal(got, np.asarray(draw(keys)))


def test_not_partitionable_symbolic_parity_is_declined():
    with jax.threefry_partitionable(False), pytest.raises(Exception, match="jax_threefry_partitionable=True"):
        to_onnx(random_cases._bits_uint8, [jax.ShapeDtypeStruct((2,), jnp.uint32), ("B", 5)])


def test_rbg_keys_draw_xlas_numbers_and_rng_uniform_is_declined():
    """rbg keys' bits are XLA's CPU Philox stream (random_philox.py); rng_uniform has no stream a
    graph could reproduce."""
    def rbg_bits(x):
        return jax.random.bits(jax.random.key(0, impl="rbg"), x.shape) + x.astype(jnp.uint32)

    x = np.zeros((3,), np.float32)
    np.testing.assert_array_equal(run_onnx(to_onnx(rbg_bits, [(3,)]), [x])[0], np.asarray(jax.jit(rbg_bits)(x)))
    with pytest.raises(Exception, match="rng_uniform is XLA's stateful generator"):
        to_onnx(lambda x: x + jax.lax.rng_uniform(0.0, 1.0, (3,)), [(3,)])


def test_uint64_bits_under_x64():
    from jax2onnx import compat

    def bits64(key, x):
        return jax.random.bits(key, x.shape, jnp.uint64)

    key, x = np.array([5, 2**32 - 1], np.uint32), np.zeros((3, 4))
    with compat.x64_enabled(True):
        model = to_onnx(bits64, [jax.ShapeDtypeStruct((2,), jnp.uint32), ("B", 4)], enable_double_precision=True)
        expected = np.asarray(bits64(key, x))
    assert expected.dtype == np.uint64
    np.testing.assert_array_equal(run_onnx(model, [key, x])[0], expected)


def test_trace_error_with_a_typed_key_spec_names_the_inputs():
    def broken(key, x):
        return jax.random.normal(key, x.shape) + (x @ jnp.ones((5,)))[0]

    with pytest.raises(Exception, match=r"key: \(\) key<fry>, x: \(3, 2\) float32"):
        to_onnx(broken, [jax.ShapeDtypeStruct((), jax.random.key(0).dtype), (3, 2)])

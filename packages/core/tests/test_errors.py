"""Mistakes users make get errors that name the culprit, never bare internal exceptions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax2onnx import InputSpecError, UnsupportedPrimitiveError, UserFunctionError, to_onnx


def test_unsupported_primitive_names_it_the_line_and_the_pack_to_install(core_only_registry):
    # Core's code names no pack, its catalog of the published packs (data) does: with core alone,
    # the message names the pack that lowers sin.
    with pytest.raises(UnsupportedPrimitiveError) as err:
        to_onnx(lambda x: jnp.sin(x), [(3,)])
    msg = str(err.value)
    assert "'sin'" in msg and "lowered by the plugin pack 'jax2onnx-lax', which is not installed" in msg, msg
    assert "(pip install jax2onnx-lax)" in msg and "Installed packs: jax2onnx-core." in msg, msg
    assert "test_errors.py:" in msg


def test_a_primitive_no_published_pack_lowers_says_where_the_packs_are_listed(core_only_registry):
    # A primitive of the user's own (no JAX module, in no catalog entry): no pack to name.
    from jax.extend.core import Primitive

    own = Primitive("my_own_op_for_test")
    own.def_abstract_eval(lambda x: x)
    with pytest.raises(UnsupportedPrimitiveError) as err:
        to_onnx(lambda x: own.bind(x), [(3,)])
    msg = str(err.value)
    assert "'my_own_op_for_test'" in msg and "No installed plugin pack lowers it" in msg, msg
    assert "architecture.md#packages" in msg, msg


def test_unknown_primitive_is_hinted_to_the_loaded_pack_lowering_its_siblings(mini_registry):
    # The mini pack lowers sin, reshape, ... which JAX defines beside tan: a tan lowering
    # belongs there, and the message says it is not converted yet instead of "install a pack".
    with pytest.raises(UnsupportedPrimitiveError) as err:
        to_onnx(lambda x: jax.lax.tan(x), [(3,)])
    assert "'jax2onnx-mini' is installed and has no lowering for it" in str(err.value)


@pytest.mark.parametrize(
    ("inputs", "fragment"),
    [
        ([(-1, 3)], "negative dim"),
        ([(2.5, 3)], "fractional dim"),
        ([(2.0, 3)], "is a float"),
        ([(None, 3)], "None"),
        ([(True, 3)], "bool"),
        ([("B", "3x")], "cannot parse"),
        ([{"shape": 3}], "cannot use dict"),
        ((3,), "bare int"),
        ("B", "list of input specs"),
    ],
)
def test_bad_shapes(mini_registry, inputs, fragment):
    with pytest.raises(InputSpecError) as err:
        to_onnx(lambda x: x * 2.0, inputs)
    assert fragment in str(err.value)


def test_unknown_dtype(mini_registry):
    class Spec:  # anything with .shape and .dtype is accepted as an array-like spec
        shape = (3,)
        dtype = "not_a_dtype"

    with pytest.raises(InputSpecError) as err:
        to_onnx(lambda x: x, [Spec()])
    assert "unknown dtype" in str(err.value)
    with pytest.raises(InputSpecError) as err:
        to_onnx(lambda x: x, [np.array(["a", "b"])])
    assert "cannot be an ONNX tensor input" in str(err.value)


def test_not_callable(mini_registry):
    with pytest.raises(InputSpecError) as err:
        to_onnx(42, [(3,)])
    assert "callable" in str(err.value)


def test_too_many_and_too_few_specs(mini_registry):
    with pytest.raises(InputSpecError) as err:
        to_onnx(lambda x: x * 2.0, [(3,), (3,)])
    assert "2 input specs" in str(err.value)
    with pytest.raises(InputSpecError) as err:
        to_onnx(lambda x, y: x * y, [(3,)])
    assert "too few" in str(err.value) and "'y'" in str(err.value)


def test_misspelled_input_param(mini_registry):
    def f(x, deterministic=True):
        return x * 2.0

    with pytest.raises(InputSpecError) as err:
        to_onnx(f, [(3,)], input_params={"determinstic": True})
    assert "determinstic" in str(err.value) and "deterministic" in str(err.value)


def test_unbound_symbol_in_input_params(mini_registry):
    def f(x, mask=None):
        return x * 2.0

    with pytest.raises(InputSpecError) as err:
        to_onnx(f, [("B", 3)], input_params={"mask": jax.ShapeDtypeStruct(("T",), jnp.bool_)})
    assert "'T'" in str(err.value) or "['T']" in str(err.value)


def test_rank_mismatch_is_explained(mini_registry):
    def f(x):
        return x @ jnp.ones((3, 3))

    with pytest.raises(UserFunctionError) as err:
        to_onnx(f, [(3, 4, 5)])
    assert "(3, 4, 5)" in str(err.value) or "'3', '4', '5'" in str(err.value)


def test_symbols_that_cannot_be_equal(mini_registry):
    with pytest.raises(UserFunctionError) as err:
        to_onnx(lambda x, y: x + y, [("A", 3), ("B", 3)])
    assert "same name" in str(err.value)


def test_function_returning_non_array(mini_registry):
    with pytest.raises(UserFunctionError) as err:
        to_onnx(lambda x: "hello", [(3,)])
    assert "str" in str(err.value) or "hello" in str(err.value)


def test_user_exception_keeps_its_message(mini_registry):
    def f(x):
        raise RuntimeError("my model refuses odd batch sizes")

    with pytest.raises(UserFunctionError) as err:
        to_onnx(f, [(3,)])
    assert "my model refuses odd batch sizes" in str(err.value)
    assert isinstance(err.value.__cause__, RuntimeError)

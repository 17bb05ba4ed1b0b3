"""A function returning something that is not an array is named by its output path, not blamed on
jax2onnx's own wrapper."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from jax2onnx import UserFunctionError, to_onnx


@pytest.mark.parametrize(
    ("fn", "where", "kind"),
    [
        (lambda x: (jnp.sin(x), "done"), r"output \[1\]", "str"),
        (lambda x: {"y": jnp.sin(x), "meta": object()}, r"output \['meta'\]", "object"),
        (lambda x: "just text", "the output", "str"),
    ],
    ids=["tuple-with-str", "dict-with-object", "bare-str"],
)
def test_a_non_array_output_is_named(mini_registry, fn, where, kind):
    with pytest.raises(UserFunctionError, match=rf"{where} of the function is a {kind}.*jnp.asarray") as err:
        to_onnx(fn, [(2, 3)])
    assert "flat_fn" not in str(err.value)


def test_numbers_and_none_are_fine(mini_registry):
    model = to_onnx(lambda x: (jnp.sin(x), 2.0, None), [(2, 3)])
    assert len(model.graph.output) == 2

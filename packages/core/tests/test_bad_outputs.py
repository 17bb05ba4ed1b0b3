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


def test_int_scalars_and_symbolic_dims_are_int64_scalar_outputs(mini_registry):
    import numpy as np
    import onnxruntime as ort

    model = to_onnx(lambda x: (x.shape[0], x.shape[0] * 2 + x.shape[1], jnp.sin(x), 7), [("B", "N")])
    outs = model.graph.output
    assert [o.type.tensor_type.elem_type for o in outs] == [7, 7, 1, 7]  # int64, int64, float, int64
    assert [len(o.type.tensor_type.shape.dim) for o in outs] == [0, 0, 2, 0]
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    b, n, s, seven = session.run(None, {session.get_inputs()[0].name: np.ones((5, 4), np.float32)})
    assert (b.dtype, int(b), int(n), int(seven)) == (np.int64, 5, 14, 7)


def test_a_bare_dim_is_a_model(mini_registry):
    model = to_onnx(lambda x: x.shape[0], [(3, 2)])
    assert model.graph.output[0].type.tensor_type.elem_type == 7

"""A function returning something that is not an array is named by its output path, not blamed on
jax2onnx's own wrapper."""

from __future__ import annotations

import jax.numpy as jnp
import pytest
from jax2onnx import UserFunctionError, compat, to_onnx


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


def test_int_scalars_and_symbolic_dims_are_scalar_outputs_of_jax_int_dtype(mini_registry):
    """int32 as JAX gives a returned Python int (its default int); int64 in double precision (x64)."""
    import numpy as np
    import onnxruntime as ort

    fn = lambda x: (x.shape[0], x.shape[0] * 2 + x.shape[1], jnp.sin(x), 7)  # noqa: E731
    for double, int_type, int_dtype in [(False, 6, np.int32), (True, 7, np.int64)]:
        model = to_onnx(fn, [("B", "N")], enable_double_precision=double)
        outs = model.graph.output
        assert [o.type.tensor_type.elem_type for o in outs] == [int_type, int_type, 11 if double else 1, int_type]
        assert [len(o.type.tensor_type.shape.dim) for o in outs] == [0, 0, 2, 0]
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        x = np.ones((5, 4), np.float64 if double else np.float32)
        b, n, s, seven = session.run(None, {session.get_inputs()[0].name: x})
        assert (b.dtype, seven.dtype, int(b), int(n), int(seven)) == (int_dtype, int_dtype, 5, 14, 7)
        with compat.x64_enabled(double):  # what JAX makes of the same outputs
            want = [jnp.asarray(leaf).dtype for leaf in fn(x)]
        assert [b.dtype, n.dtype, s.dtype, seven.dtype] == want


def test_python_scalars_verify_against_jax(mini_registry):
    """verify compares a returned 3 / 2.5 / True with the JAX dtypes (int32, float32, bool), not
    numpy's (int64, float64)."""
    from jax2onnx import verify

    fn = lambda x: (jnp.sin(x), 3, 2.5, True)  # noqa: E731
    model = to_onnx(fn, [(2, 3)])
    assert [o.type.tensor_type.elem_type for o in model.graph.output] == [1, 6, 1, 9]
    report = verify(fn, model, [(2, 3)])
    assert report.ok, str(report)


def test_a_python_int_outside_int32_is_a_clear_error(mini_registry):
    with pytest.raises(UserFunctionError, match=r"Python int 4294967296, outside int32.*enable_double_precision"):
        to_onnx(lambda x: (x, 2**32), [(2,)])
    model = to_onnx(lambda x: (x, 2**32), [(2,)], enable_double_precision=True)
    assert model.graph.output[1].type.tensor_type.elem_type == 7


def test_a_bare_dim_is_a_model(mini_registry):
    model = to_onnx(lambda x: x.shape[0], [(3, 2)])
    assert model.graph.output[0].type.tensor_type.elem_type == 6  # int32, JAX's int

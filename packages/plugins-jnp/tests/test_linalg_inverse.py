"""Singular matrices under target="onnxruntime" (com.microsoft.Inverse): no error, results
non-finite wherever JAX's are (NaN throughout; see jax2onnx_jnp.linalg_inverse's docstring)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import to_onnx

ort = pytest.importorskip("onnxruntime")

SINGULAR = {
    "zeros": np.zeros((3, 3)),
    "rank_one": np.outer([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),
    "equal_rows": np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]),
    "equal_columns": np.array([[1.0, 1.0, 3.0], [2.0, 2.0, 3.0], [4.0, 4.0, 6.0]]),
}


def _export_run(fn, args, dtype):
    x64 = dtype == np.float64
    with jax.enable_x64(x64):
        model = to_onnx(fn, [jax.ShapeDtypeStruct(a.shape, dtype) for a in args], target="onnxruntime",
                        enable_double_precision=x64)
        onnx.checker.check_model(model, full_check=True)
        assert [n.op_type for n in model.graph.node].count("Inverse") == 1
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        ours = sess.run(None, {i.name: a.astype(dtype) for i, a in zip(sess.get_inputs(), args, strict=True)})[0]
        theirs = np.asarray(jax.jit(fn)(*(a.astype(dtype) for a in args)))
    return ours, theirs


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", sorted(SINGULAR))
def test_inv_of_a_singular_matrix_is_nan(kind, dtype):
    """Eigen's inverse has JAX's inf/NaN entries; the refinement step's products make them NaN
    throughout (JAX's: inf, -inf, NaN and finite entries)."""
    ours, theirs = _export_run(lambda a: jnp.linalg.inv(a), [SINGULAR[kind]], dtype)
    assert not np.isfinite(theirs).all()
    assert np.isnan(ours).all()


def test_the_inverse_node_itself_has_jaxs_singular_entries():
    """Without the refinement step (the Inverse node's output read directly) inf and NaN are
    where JAX's inv has them."""
    from onnx import TensorProto, helper

    a = helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 3])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 3])
    model = helper.make_model(helper.make_graph([helper.make_node("Inverse", ["a"], ["x"], domain="com.microsoft")],
                                                "inverse", [a], [x]),
                              opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for kind, matrix in SINGULAR.items():
        ours = sess.run(None, {"a": matrix.astype(np.float32)})[0]
        theirs = np.asarray(jnp.linalg.inv(matrix.astype(np.float32)))
        for same in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(same(ours), same(theirs), err_msg=kind)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", sorted(SINGULAR))
def test_solve_with_a_singular_matrix_is_non_finite_where_jax_is(kind, dtype):
    """JAX's LU solve leaves the entries its back substitution does not reach from the zero pivot
    finite (equal columns: [-inf, inf, 0.17]); the refinement step's products spread the inverse's
    inf/NaN to every entry, so ours is NaN throughout: non-finite wherever JAX's is."""
    b = np.array([1.0, 2.0, 3.0])
    ours, theirs = _export_run(lambda a, b: jnp.linalg.solve(a, b), [SINGULAR[kind], b], dtype)
    assert not np.isfinite(theirs).all()
    assert np.isnan(ours).all()

"""Singular matrices under target="onnxruntime" (com.microsoft.Inverse): no error, non-finite
results where JAX's are (see jax2onnx_jnp.linalg_inverse's docstring for the exact difference)."""

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
def test_inv_of_a_singular_matrix_is_jaxs_inf_and_nan(kind, dtype):
    """Eigen's partial-pivoting LU inverse divides by the zero pivot as LAPACK's does: the same
    entries are inf, -inf, NaN and finite."""
    ours, theirs = _export_run(lambda a: jnp.linalg.inv(a), [SINGULAR[kind]], dtype)
    assert not np.isfinite(theirs).all()
    np.testing.assert_array_equal(np.isnan(ours), np.isnan(theirs))
    np.testing.assert_array_equal(np.isposinf(ours), np.isposinf(theirs))
    np.testing.assert_array_equal(np.isneginf(ours), np.isneginf(theirs))
    finite = np.isfinite(theirs)
    np.testing.assert_allclose(ours[finite], theirs[finite], rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kind", sorted(SINGULAR))
def test_solve_with_a_singular_matrix_is_non_finite_where_jax_is(kind, dtype):
    """JAX's LU solve leaves the entries its back substitution does not reach from the zero pivot
    finite (equal columns: [-inf, inf, 0.17]); the refinement step's products spread the inverse's
    inf/NaN to every entry, so ours is NaN throughout: non-finite wherever JAX's is, never finite
    where JAX's is not."""
    b = np.array([1.0, 2.0, 3.0])
    ours, theirs = _export_run(lambda a, b: jnp.linalg.solve(a, b), [SINGULAR[kind], b], dtype)
    assert not np.isfinite(theirs).all()
    assert np.isnan(ours).all()

"""``cholesky`` under target="onnxruntime" (jax2onnx_lax.linalg_cholesky_inverse) on what the
testcases cannot express: inputs that are not positive definite (JAX's factor is NaN throughout,
and so must ours be: a non-positive pivot, a zero pivot, a singular leading block that makes
Inverse return inf/NaN, in the halving and in the panel steps), and float16 input (JAX has no
CPU cholesky for it: compared with the float64 factor rounded)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import compat, to_onnx

ort = pytest.importorskip("onnxruntime")


def _spd(n, seed=0):
    g = np.random.default_rng(seed).standard_normal((n, n))
    return g @ g.T + n * np.eye(n)


def _singular_leading_block(n, k):
    """Identity except a leading k x k block of ones: that block is singular (rank 1), so the first
    Inverse of its halving or panel step sees a singular matrix."""
    a = np.eye(n)
    a[:k, :k] = 1.0
    return a


def _zero_pivot():
    return np.array([[4.0, 2.0, 0.0], [2.0, 1.0, 0.0], [0.0, 0.0, 1.0]])  # d_2 = 1 - 2 * 2 / 4 = 0


NOT_PD = {
    "negative_definite": lambda: -_spd(4),
    "indefinite": lambda: _spd(8) - 20.0 * np.diag(np.arange(8) % 2),
    "last_pivot_negative": lambda: _spd(5) - np.diag([0, 0, 0, 0, 1e3]),
    "zero_pivot": _zero_pivot,
    "zeros": lambda: np.zeros((4, 4)),
    # the 2 x 2 leaves' closed form: a zero second pivot, a zero first pivot (c / sqrt(0))
    "zero_second_pivot_2x2": lambda: np.ones((2, 2)),
    "zero_second_pivot_in_a_leaf": lambda: np.block([[np.eye(2), np.zeros((2, 2))], [np.zeros((2, 2)), np.ones((2, 2))]]),
    "zero_first_pivot_2x2": lambda: np.array([[0.0, 0.0], [0.0, 1.0]]),
    "zero_first_pivot_coupled_2x2": lambda: np.array([[0.0, 1.0], [1.0, 5.0]]),
    "singular_leading_block": lambda: _singular_leading_block(8, 4),
    "singular_first_pivot_block": lambda: _singular_leading_block(3, 2),
    # n = 64 > PANEL: the first panel step's pivot block is singular
    "singular_panel_block": lambda: _singular_leading_block(64, 32),
}


def _export(fn, n, dtype=np.float32, batch=()):
    model = to_onnx(fn, [jax.ShapeDtypeStruct((*batch, n, n), dtype)], target="onnxruntime")
    onnx.checker.check_model(model, full_check=True)
    # the halving form computes in float64 (n = 2's one level inverts a 1 x 1 block: Reciprocal)
    assert any(node.op_type == "Cast" and node.attribute[0].i == onnx.TensorProto.DOUBLE for node in model.graph.node)
    assert not any(node.op_type == "Loop" for node in model.graph.node)
    if n > 2:
        assert any(node.op_type == "Inverse" for node in model.graph.node), "expected the Inverse form"
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _run(sess, a):
    return sess.run(None, {sess.get_inputs()[0].name: a})[0]


def _failed(factor):
    """JAX's convention: a failed potrf makes the primitive's factor NaN everywhere, and
    ``lax.linalg.cholesky`` then zeroes the upper triangle (its ``tril``)."""
    lower = np.tril(np.ones(factor.shape[-2:], dtype=bool))
    return bool(np.isnan(factor[..., lower]).all() and (factor[..., ~lower] == 0).all())


@pytest.mark.parametrize("kind", sorted(NOT_PD))
def test_not_positive_definite_is_nan_throughout(kind):
    a = NOT_PD[kind]().astype(np.float32)
    assert _failed(np.asarray(jnp.linalg.cholesky(a)))
    ours = _run(_export(lambda x: jnp.linalg.cholesky(x), len(a)), a)
    assert _failed(ours)


def test_a_nan_entry_makes_the_factor_nan():
    """LAPACK's potrf does not stop at a NaN pivot: JAX's factor is NaN from the NaN's column on and
    finite before it. Ours is NaN throughout (the standard lowering's convention too): NaN
    wherever JAX's is, and in JAX's finite leading columns as well."""
    a = np.where(np.eye(6, k=-2) > 0, np.nan, _spd(6)).astype(np.float32)
    theirs = np.asarray(jnp.linalg.cholesky(a))
    ours = _run(_export(lambda x: jnp.linalg.cholesky(x), 6), a)
    assert _failed(ours)
    assert np.isnan(theirs).any() and np.isnan(ours[np.isnan(theirs)]).all()


def test_one_failed_matrix_of_a_batch_leaves_the_others():
    good, bad = _spd(6, 1), -_spd(6, 2)
    a = np.stack([good, bad, good]).astype(np.float32)
    ours = _run(_export(lambda x: jnp.linalg.cholesky(x), 6, batch=(3,)), a)
    theirs = np.asarray(jnp.linalg.cholesky(a))
    assert _failed(ours[1]) and _failed(theirs[1])
    np.testing.assert_allclose(ours[[0, 2]], theirs[[0, 2]], rtol=1e-5, atol=1e-5)


def test_zeros_above_the_diagonal_are_exact():
    a = _spd(100, 3).astype(np.float32)
    ours = _run(_export(lambda x: jnp.linalg.cholesky(x), 100), a)
    assert (np.triu(ours, 1) == 0).all()
    np.testing.assert_allclose(ours, np.asarray(jnp.linalg.cholesky(a)), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("n", [2, 7, 40])
def test_float16_matches_the_rounded_float64_factor(n):
    """JAX has no float16 cholesky on CPU; ours computes in float64 and rounds once, so it is the
    float64 factor of the float16 input rounded to float16, up to a unit of rounding."""
    a = _spd(n, 4).astype(np.float16)
    ours = _run(_export(lambda x: jnp.linalg.cholesky(x), n, np.float16), a)
    assert ours.dtype == np.float16
    reference = np.linalg.cholesky(a.astype(np.float64))
    np.testing.assert_allclose(ours.astype(np.float64), reference, rtol=2.0**-10,
                               atol=2.0**-14 * np.abs(reference).max())


def test_float64_and_other_targets_keep_the_standard_lowering():
    with compat.x64_enabled(True):
        f64 = to_onnx(lambda x: jnp.linalg.cholesky(x), [jax.ShapeDtypeStruct((8, 8), np.float64)],
                      target="onnxruntime", enable_double_precision=True)
    generic = to_onnx(lambda x: jnp.linalg.cholesky(x), [jax.ShapeDtypeStruct((8, 8), np.float32)])
    for model in (f64, generic):
        assert not any(node.op_type == "Inverse" for node in model.graph.node)

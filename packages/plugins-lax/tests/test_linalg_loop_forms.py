"""The Loop forms of the linear-algebra lowerings, which matrices larger than the unroll caps get.

The testcases use small matrices, so they exercise the unrolled straight-line forms (and Jacobi
rounds unrolled inside the sweep); here the caps are lowered to 0 and a representative set of those
testcases runs again through the Loop forms (exported, checked, compared with JAX in onnxruntime),
float32 and float64. JAX's outputs are the testcase suite's (the settings change the export only):
the runner finds them by testcase and inputs (jax2onnx.testing.references)."""

import pytest
from jax2onnx.testing.pytest_plugin import selected_variants
from jax2onnx.testing.runner import run_variant
from jax2onnx_lax import _jacobi_rows, linalg_eig, linalg_factor, linalg_solve

_CASES = {
    "lax.linalg.lu": ["lu", "lu_tall", "lu_wide", "lu_zero_column", "lu_batched"],
    "lax.linalg.triangular_solve": [
        "triangular_solve_left_lower",
        "triangular_solve_left_upper_transpose_unit",
        "triangular_solve_right_lower",
        "solve",
    ],
    "lax.linalg.cholesky": ["cholesky_batched", "cholesky_not_positive_definite"],
    "lax.linalg.qr": ["qr_tall_reduced", "qr_tall_complete", "qr_wide", "householder_product"],
    "lax.linalg.eigh": ["eigh", "eigh_odd_batched"],
    "lax.linalg.svd": ["svd_tall_batched", "svd_wide"],
}


@pytest.mark.parametrize("variant", selected_variants("jax2onnx-lax", _CASES))
def test_loop_form(variant, monkeypatch):
    monkeypatch.setattr(linalg_factor, "UNROLL_MAX", 0)
    monkeypatch.setattr(linalg_solve, "UNROLL_MAX", 0)
    monkeypatch.setattr(linalg_eig, "_UNROLL_ROUNDS", 0)
    result = run_variant(variant)
    assert any(n.op_type == "Loop" for n in result.model.graph.node), "the Loop form was not exported"
    if variant.component in ("lax.linalg.eigh", "lax.linalg.svd"):  # the rounds' own Loop inside the sweeps'
        sweeps = next(n for n in result.model.graph.node if n.op_type == "Loop")
        assert any(n.op_type == "Loop" for n in sweeps.attribute[0].g.node), "the rounds were not a Loop"


_JACOBI_CASES = {
    "lax.linalg.eigh": ["eigh", "eigh_odd_batched", "eigh_upper_only", "eigh_repeated_eigenvalues"],
    "lax.linalg.svd": ["svd", "svd_tall_batched", "svd_wide", "matrix_rank"],
}


@pytest.mark.parametrize("variant", selected_variants("jax2onnx-lax", _JACOBI_CASES))
@pytest.mark.parametrize("unroll", [0, 15])
def test_jacobi_rows_form(variant, unroll, monkeypatch):
    """The row-by-row Jacobi rounds that matrices above ``_DENSE_MAX`` get, forced on the small
    testcases: its rounds as an inner Loop (``unroll`` 0) and unrolled in the sweep."""
    monkeypatch.setattr(linalg_eig, "_DENSE_MAX", 0)
    monkeypatch.setattr(_jacobi_rows, "UNROLL_ROUNDS", unroll)
    result = run_variant(variant)
    sweeps = next(n for n in result.model.graph.node if n.op_type == "Loop")
    body = sweeps.attribute[0].g.node
    assert not any(n.op_type == "ScatterElements" for n in body), "the dense transform was exported"
    assert any(n.op_type == "Loop" for n in body) == (unroll == 0)


@pytest.mark.parametrize("fn", ["eigh", "svd"])
def test_jacobi_blocks_before_opset_16(fn):
    """Three rounds a transform repeat columns, which ScatterElements adds up (reduction="add",
    opset 16); at opset 15 the blocks are two rounds. Exported at 15, checked, run and compared."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    import onnx
    import onnxruntime as ort
    from jax2onnx import to_onnx

    a = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    a = a + a.T
    f = (lambda x: jnp.linalg.eigh(x)[0]) if fn == "eigh" else (lambda x: jnp.linalg.svd(x, compute_uv=False))
    model = to_onnx(f, [jax.ShapeDtypeStruct(a.shape, a.dtype)], opset=15)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: a})
    np.testing.assert_allclose(got, np.asarray(jax.jit(f)(a)), rtol=2e-5, atol=2e-5)

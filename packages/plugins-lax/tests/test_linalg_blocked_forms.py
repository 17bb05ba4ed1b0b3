"""The blocked forms of the unrolled factorisations and solves, which matrices larger than the panel
widths (32) get.

The testcases use matrices of 3-5 rows, below the panels, so here the panel and block widths are
lowered to 2 (and the triangular solve's diagonal blocks also to 3, so that 4 and 5 rows need a
padded last block) and those testcases run again (exported, checked, compared with JAX in onnxruntime,
float32 and float64): several panels, a last panel narrower than the others, tall, wide and batched
operands, a zero pivot column, a matrix that is not positive definite, upper and lower, unit and
transposed triangles."""

import pytest
from jax2onnx.testing.pytest_plugin import selected_variants
from jax2onnx.testing.runner import run_variant
from jax2onnx_lax import _substitution, linalg_factor

_CASES = {
    "lax.linalg.lu": ["lu", "lu_tall", "lu_wide", "lu_zero_column", "lu_batched", "lu_solve", "lu_scipy_plu"],
    "lax.linalg.triangular_solve": [
        "triangular_solve_left_lower",
        "triangular_solve_left_upper",
        "triangular_solve_left_upper_transpose_unit",
        "triangular_solve_right_lower",
        "solve_triangular_scipy",
        "solve",
        "solve_vmapped_vector",
        "inv",
    ],
    "lax.linalg.cholesky": ["cholesky", "cholesky_batched", "cholesky_not_positive_definite", "cho_solve",
                            "cho_solve_upper"],
}


@pytest.mark.parametrize("trsm_block", [2, 3])
@pytest.mark.parametrize("variant", selected_variants("jax2onnx-lax", _CASES))
def test_blocked_form(variant, trsm_block, monkeypatch):
    monkeypatch.setattr(linalg_factor, "LU_PANEL", 2)
    monkeypatch.setattr(linalg_factor, "CHOLESKY_PANEL", 2)
    monkeypatch.setattr(_substitution, "TRSM_BLOCK", trsm_block)
    result = run_variant(variant)
    ops = {n.op_type for n in result.model.graph.node}
    # a blocked form updates the trailing rows by a MatMul (the column-by-column forms have none)
    assert "MatMul" in ops, "the blocked form was not exported"

"""Checks the testcase format cannot express: other opsets (the lowerings' fallbacks), patches
undone after an export, the mark ignored outside exports, and the grad/backward distinction."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax2onnx import allclose, to_onnx
from jax2onnx.testing.runner import op_types
from jax2onnx_jnp.testcases.attention import _dpa_mask, _huge_masked_logits


@pytest.mark.parametrize("opset", [23, 22])
def test_masked_attention_with_huge_logits_on_both_paths(opset):
    values = _huge_masked_logits()
    model = to_onnx(_dpa_mask, values, opset=opset)
    ops = op_types(model)
    if opset >= 23:
        assert "Attention" in ops
    else:  # no Attention op before opset 23: the MatMul/Softmax chain
        assert "Attention" not in ops and {"MatMul", "Softmax", "Where"} <= ops
    result = allclose(_dpa_mask, model, values, rtol=1e-5, atol=1e-5)
    assert result, result
    # The kept keys average values in [1, 4]; a leak of the masked key (value -50) would show.
    out = np.asarray(_dpa_mask(*values))
    assert (out > 0.9).all()


def test_gelu_before_opset_20_lowers_the_decomposition():
    fn = lambda x: jax.nn.gelu(x)  # noqa: E731
    x = np.linspace(-4, 4, 12, dtype=np.float32).reshape(3, 4)
    model = to_onnx(fn, [x], opset=19)
    assert "Gelu" not in op_types(model) and "Tanh" in op_types(model)
    assert allclose(fn, model, [x], rtol=1e-5, atol=1e-6)


def test_patches_are_undone_after_export():
    originals = (jnp.einsum, jnp.matmul, jax.nn.gelu, jax.nn.dot_product_attention, jnp.linalg.norm)
    to_onnx(lambda a, b: jnp.einsum("ij,jk->ik", a, b) @ b.T, [(2, 3), (3, 3)])
    assert (jnp.einsum, jnp.matmul, jax.nn.gelu, jax.nn.dot_product_attention, jnp.linalg.norm) == originals


def test_square_matmul_backward_pass_is_not_taken_for_the_forward_call():
    # grad(sum(sin(x @ w))) w.r.t. x is cos(x @ w) @ w.T; the backward jit carries the forward's
    # name and, for square operands, its operand shapes: fusing it as `a @ b` would be wrong.
    fn = jax.grad(lambda x, w: jnp.sum(jnp.sin(jnp.matmul(x, w))))
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 3)).astype(np.float32)
    model = to_onnx(fn, [x, w])
    assert allclose(fn, model, [x, w], rtol=1e-5, atol=1e-5)

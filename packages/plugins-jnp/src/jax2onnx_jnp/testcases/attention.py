"""Testcases of ``jax.nn.dot_product_attention`` (the lowering is in :mod:`jax2onnx_jnp.attention`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import onnx
from jax2onnx.testing import Component, Testcase, Variant
from jax2onnx.testing.runner import op_types, unavailable_ops

from .helpers import grad_of_sum


def _paths(model: onnx.ModelProto, variant: Variant) -> None:
    """float32: the Attention op; float64, or an opset before Attention (23): the MatMul/Softmax
    chain (JAX's float32 softmax)."""
    found = op_types(model)
    if not variant.double and not unavailable_ops(model, ["Attention"]):
        assert "Attention" in found and "Softmax" not in found, f"expected Attention, got {sorted(found)}"
    else:
        assert {"MatMul", "Softmax"} <= found and "Attention" not in found, f"expected the chain: {sorted(found)}"


def _dpa(q, k, v):
    return jax.nn.dot_product_attention(q, k, v)


def _dpa_mask(q, k, v, m):
    return jax.nn.dot_product_attention(q, k, v, mask=m)


def _dpa_bias_mask_causal(q, k, v, b, m):
    return jax.nn.dot_product_attention(q, k, v, bias=b, mask=m, is_causal=True)


def _mask_keeps_first(rng, shape, dtype):
    """Random masks that keep key 0 in every row (a fully masked row is its own case)."""
    if dtype == np.bool_:
        m = rng.random(shape) > 0.5
        m[..., 0] = True
        return m
    return rng.standard_normal(shape).astype(dtype)


def _huge_masked_logits():
    """Key 1 aligns with every query (logit ~ 1.4e4) but is masked out; keys 0 and 2 are kept.
    Zeroing after the softmax instead of masking before it would return ~0 here."""
    q = np.full((1, 2, 1, 2), 10.0, np.float32)
    k = np.array([[[[0.1, 0.2]], [[1000.0, 1000.0]], [[0.3, -0.1]]]], np.float32)
    v = np.array([[[[1.0, 2.0]], [[-50.0, -50.0]], [[3.0, 4.0]]]], np.float32)
    m = np.array([[[[True, False, True], [True, False, True]]]])
    return [q, k, v, m]


def _fully_masked_row():
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 3, 2, 4)).astype(np.float32) for _ in range(3))
    m = np.ones((1, 2, 3, 5 - 2), bool)
    m[0, 1, 2, :] = False
    return [q, k, v, m]


_QKV = [("B", 4, 2, 8)] * 3

# JAX runs the softmax in float32 even for float64 inputs, so its float64 result is only float32
# accurate: float64 variants compare at float32-level tolerance.
_F64_TOL = {"rtol_f64": 1e-6, "atol_f64": 1e-6}
_M = jax.ShapeDtypeStruct(("B", 2, 4, 4), jnp.bool_)

components = [
    Component(
        name="nn.dot_product_attention",
        onnx=["Attention", "MatMul", "Softmax"],
        since="v0.1.0",
        testcases=[
            Testcase("dpa_basic", _dpa, [(2, 4, 8, 32)] * 3, check=_paths, **_F64_TOL),
            Testcase("dpa_diff_heads_embed", _dpa, [(1, 2, 4, 16)] * 3, check=_paths, **_F64_TOL),
            Testcase("dpa_batch4_seq16", _dpa, [(4, 2, 16, 8)] * 3, check=_paths, **_F64_TOL),
            Testcase("dpa_float64", _dpa, [("B", 4, 8, 32)] * 3, check=_paths, **_F64_TOL,
                     description="float64: the _f64 variants; the chain's softmax runs in float32 as in JAX"),
            Testcase("dpa_heads1_embed4", _dpa, [(2, 1, 8, 4)] * 3, check=_paths, **_F64_TOL),
            Testcase("dpa_heads8_embed8", _dpa, [(2, 8, 8, 8)] * 3, check=_paths, **_F64_TOL),
            Testcase("dpa_batch1_seq2", _dpa, [(1, 2, 2, 8)] * 3, check=_paths, **_F64_TOL),
            Testcase("dpa_batch8_seq4", _dpa, [(8, 2, 4, 16)] * 3, check=_paths, **_F64_TOL),
            Testcase("dpa_axis1", _dpa, [(2, 4, 8, 32)] * 3, check=_paths, **_F64_TOL),
            Testcase("dpa_symbolic_seq", _dpa, [("B", "T", 2, 8)] * 3, check=_paths, **_F64_TOL),
            Testcase("dpa_cross_lengths", _dpa, [("B", 3, 2, 8), ("B", 5, 2, 8), ("B", 5, 2, 8)], check=_paths, **_F64_TOL),
            Testcase("dpa_gqa", _dpa, [("B", 3, 4, 8), ("B", 5, 2, 8), ("B", 5, 2, 8)], check=_paths, **_F64_TOL,
                     description="4 query heads share 2 key/value heads"),
            Testcase("dpa_scale", lambda q, k, v: jax.nn.dot_product_attention(q, k, v, scale=0.3), _QKV,
                     check=_paths, **_F64_TOL),
            Testcase("dpa_causal", lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True),
                     [("B", 4, 2, 8), ("B", 6, 2, 8), ("B", 6, 2, 8)], check=_paths, **_F64_TOL),
            Testcase("dpa_causal_longer_queries", lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=True),
                     [("B", 5, 2, 8), ("B", 3, 2, 8), ("B", 3, 2, 8)], check=_paths, **_F64_TOL),
            Testcase("dpa_mask", _dpa_mask, [*_QKV, _M], check=_paths, **_F64_TOL, input_generator=_mask_keeps_first),
            Testcase("dpa_mask_broadcast", _dpa_mask, [*_QKV, jax.ShapeDtypeStruct(("B", 1, 1, 4), jnp.bool_)],
                     check=_paths, **_F64_TOL, input_generator=_mask_keeps_first),
            Testcase("dpa_bias", lambda q, k, v, b: jax.nn.dot_product_attention(q, k, v, bias=b),
                     [*_QKV, (1, 2, 4, 4)], check=_paths, **_F64_TOL),
            Testcase("dpa_bias_mask_causal", _dpa_bias_mask_causal, [*_QKV, ("B", 2, 4, 4), _M], check=_paths, **_F64_TOL,
                     input_generator=_mask_keeps_first),
            Testcase("dpa_huge_masked_logits", _dpa_mask, input_values=_huge_masked_logits(), check=_paths, **_F64_TOL,
                     description="masked-out logits far above the kept ones (Attention op in f32, chain in f64)"),
            Testcase("dpa_fully_masked_row", _dpa_mask, input_values=_fully_masked_row(), check=_paths, **_F64_TOL,
                     run_f64=False,
                     description="a row with no key kept: uniform weights as in JAX >= 0.7 (JAX 0.6 gives NaN "
                                 "in float64, so only float32 is compared)"),
            Testcase("dpa_unbatched", _dpa, [(4, 2, 8)] * 3, check=_paths, **_F64_TOL, description="(T, N, H) inputs"),
            Testcase("dpa_vmap", jax.vmap(_dpa), [("B", 2, 4, 2, 8)] * 3, **_F64_TOL,
                     description="under vmap the marked call is lowered from its body"),
            Testcase("dpa_grad", grad_of_sum(_dpa_mask), [*_QKV, _M], input_generator=_mask_keeps_first,
                     rtol=1e-3, atol=1e-4, rtol_f64=1e-5, atol_f64=1e-6),
        ],
    ),
]

"""Testcases of :mod:`jax2onnx_lax.linalg_cholesky_inverse`: ``cholesky`` under
``target="onnxruntime"`` is recursive halving with ``com.microsoft.Inverse`` computed in float64
for a float32 operand (each case checks the float32 graph has an Inverse and a Cast to float64,
so a silent fallback to the standard lowering fails), and keeps the standard lowering for a
float64 operand (checked: no Inverse) and under the default target. Non-positive-definite and
singular inputs, float16: tests/test_linalg_cholesky_inverse.py."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import numpy as np
import onnx
from jax import lax
from jax2onnx.testing import Component, Testcase

_TOL = dict(rtol=1e-4, atol=1e-5, rtol_f64=1e-10, atol_f64=1e-11)


def _spd(rng, shape, dtype):
    """Symmetric positive definite for a square operand (``G G^T + n I``); a right-hand side stays
    standard normal."""
    a = rng.standard_normal(shape)
    if len(shape) < 2 or shape[-1] != shape[-2]:
        return a
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _lower_only(rng, shape, dtype):
    """SPD in the lower triangle, garbage above it: potrf (and so JAX's primitive) reads only the
    lower triangle."""
    a = _spd(rng, shape, dtype)
    return np.tril(a) + np.triu(rng.standard_normal(shape) * 100.0, 1)


def _nonsymmetric(rng, shape, dtype):
    """SPD plus an antisymmetric part: jnp.linalg.cholesky factors the symmetric part
    ``(x + x^T) / 2``, which the lowering recognises and does not mirror again."""
    noise = rng.standard_normal(shape)
    return _spd(rng, shape, dtype) + noise - np.swapaxes(noise, -1, -2)


def _count(model: onnx.ModelProto, op_type: str) -> int:
    return sum(1 for n in model.graph.node if n.op_type == op_type)


def _casts_to_double(model: onnx.ModelProto) -> bool:
    return any(n.op_type == "Cast" and any(a.name == "to" and a.i == onnx.TensorProto.DOUBLE for a in n.attribute)
               for n in model.graph.node)


def _halving_form(inverses: bool, budget: int | None):
    """float32: the Inverse form (in float64; with Inverse nodes unless n <= 2, a 1 x 1 pivot or the
    2 x 2 closed form), no Loop, at most ``budget`` nodes; float64: the standard lowering, no Inverse."""

    def check(model, variant):
        if variant.double:
            assert _count(model, "Inverse") == 0, f"{variant.id}: float64 must keep the standard cholesky"
            return
        assert _casts_to_double(model), f"{variant.id}: the Inverse form computes in float64"
        assert _count(model, "Loop") == 0, f"{variant.id}: the Inverse form is straight-line"
        if inverses:
            assert _count(model, "Inverse") >= 1, f"{variant.id}: expected com.microsoft.Inverse (halving form)"
        if budget is not None:
            assert len(model.graph.node) <= budget, f"{variant.id}: {len(model.graph.node)} nodes > {budget}"

    return check


def _ort(name, fn, shapes, *, inverses=True, generator=_spd, budget=None, **kw):
    return Testcase(name, fn, shapes, input_generator=generator, target="onnxruntime",
                    expected_ops=["Inverse"] if inverses else ["Sqrt"], expected_ops_f64=(),
                    check=_halving_form(inverses, budget), **{**_TOL, **kw})


# Testcases look the functions up at call time (a patched library function is looked up then).
def _cholesky(a):
    return jnp.linalg.cholesky(a)


def _lax_cholesky(a):
    return lax.linalg.cholesky(a, symmetrize_input=False)


def _cho_solve(a, b):
    return jsl.cho_solve(jsl.cho_factor(a, lower=True), b)


def _cho_solve_upper(a, b):
    return jsl.cho_solve(jsl.cho_factor(a, lower=False), b)


def _cho_factor_lower(a):
    return jnp.tril(jsl.cho_factor(a, lower=True)[0])


components = [
    Component(
        "lax.linalg.cholesky",
        onnx=["Inverse", "MatMul", "Sqrt"],
        description='target="onnxruntime", float32: recursive halving with com.microsoft.Inverse in float64',
        testcases=[
            _ort("cholesky_ort_1", _cholesky, [(1, 1)], inverses=False),
            _ort("cholesky_ort_2", _cholesky, [(2, 2)], inverses=False),  # the 2 x 2 closed form alone
            _ort("cholesky_ort_3", _cholesky, [(3, 3)]),
            _ort("cholesky_ort_8", _cholesky, [(8, 8)]),
            # node budgets (95 and 118 nodes today; the standard lowering: 403 and ~630): O(log n)
            # levels, and jnp.linalg.cholesky's (x + x^T) / 2 is not mirrored again
            _ort("cholesky_ort_64", _cholesky, [(64, 64)], budget=100),
            # padded to 128 with an identity block; above PANEL: panel steps, then the halving
            _ort("cholesky_ort_100", _cholesky, [(100, 100)], budget=125),
            _ort("cholesky_ort_batched", _cholesky, [("B", 2, 5, 5)]),
            _ort("cholesky_ort_batched_panels", _cholesky, [("B", 40, 40)], static_sizes={"B": 2}),
            _ort("cholesky_ort_vmap", jax.vmap(_cholesky), [("B", 6, 6)]),
            _ort("cholesky_ort_nonsymmetric_input", _cholesky, [("B", 12, 12)], generator=_nonsymmetric),
            _ort("cholesky_ort_lower_triangle_only", _lax_cholesky, [("B", 7, 7)], generator=_lower_only),
            _ort("cho_solve_ort", _cho_solve, [(6, 6), (6, 3)]),
            _ort("cho_solve_ort_upper", _cho_solve_upper, [("B", 5, 5), ("B", 5, 2)]),
            _ort("cho_factor_ort", _cho_factor_lower, [(9, 9)]),
            Testcase("cholesky_generic_keeps_standard", _cholesky, [("B", 8, 8)], input_generator=_spd,
                     forbidden_ops=["Inverse"], **_TOL),
        ],
    ),
]

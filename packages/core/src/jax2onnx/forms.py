"""Compact, accurate forms of functions ONNX has no op for, written once for both sides: the lax
pack's lowerings (``m`` is its ``Math``: ``m.op.<Op>(...)``, ``m.k(value)``) and the rewrite stage
(``m`` is a ``jax2onnx.passes.rewrite.emit.Emitter`` with the same two members). Imports only
``jax2onnx.ir.opsets`` (which opset has Gelu), so any layer above it may use it.

float32 erfc (17 nodes):
- x < 1: 1 - Erf(x), as XLA computes it there (erfc >= 0.157, so the subtraction loses < 3 bits);
- x >= 1: exp(-x*x) * R(x), R a (3, 3) rational fit of erfc(x) exp(x^2) on [1, 9.3] (above 9.3
  float32 erfc is subnormal, which XLA flushes to 0) written as a continued fraction, 9 nodes
  instead of Horner's 12 and no inf/inf at x = inf. Constants and their derivation:
  packages/plugins-lax/tools/fit_erfc_tail.py (5.6e-7 max relative error evaluated in float32).
  exp(-x*x) rounds x*x as XLA does, so the two agree to a few ulps where exp magnifies that rounding
  (x near 9): 8.4e-7 max relative difference from jax.scipy.special.erfc over [-10, 10].
"""

from __future__ import annotations

import math
from typing import Any

from .ir.opsets import op_available

#: erfc(x) exp(x^2) ~ c0 + a1 / (x + b1 + a2 / (x + b2 + a3 / (x + b3))) on [1, 9.3].
ERFC_TAIL_C0 = -2.2668255260827243e-05
ERFC_TAIL_A = (0.5649443889881923, 0.3482751260996825, 14.04209579194339)
ERFC_TAIL_B = (0.018920052705499655, -2.2353190597362573, 4.881353186415882)

SQRT_HALF = math.sqrt(0.5)


def erfc_float32(m: Any, x: Any) -> Any:
    """erfc of a float32 ``x`` in 17 nodes. No clamp is needed: at x = inf the fraction is c0
    (finite) and exp(-inf) = 0; the untaken branch's pole (x = -b3) is discarded by the Where."""
    op = m.op
    t = op.Add(x, m.k(ERFC_TAIL_B[2]))
    t = op.Add(op.Add(x, m.k(ERFC_TAIL_B[1])), op.Div(m.k(ERFC_TAIL_A[2]), t))
    t = op.Add(op.Add(x, m.k(ERFC_TAIL_B[0])), op.Div(m.k(ERFC_TAIL_A[1]), t))
    fraction = op.Add(m.k(ERFC_TAIL_C0), op.Div(m.k(ERFC_TAIL_A[0]), t))
    tail = op.Mul(op.Exp(op.Neg(op.Mul(x, x))), fraction)
    return op.Where(op.Less(x, m.k(1.0)), op.Sub(m.k(1.0), op.Erf(x)), tail)


def normal_cdf_float32(m: Any, x: Any) -> Any:
    """The standard normal CDF (jax.scipy.stats.norm.cdf, scipy's ndtr) as 0.5 * erfc(-x / sqrt 2):
    19 nodes, relatively accurate in the lower tail (where 0.5 * (1 + erf) would round to 0)."""
    return m.op.Mul(erfc_float32(m, m.op.Mul(x, m.k(-SQRT_HALF))), m.k(0.5))


def gelu_exact(m: Any, x: Any, opset: int) -> Any:
    """x * Phi(x): ONNX's Gelu from opset 20, before it 0.5 * x * (1 + Erf(x / sqrt 2)) (5 nodes,
    what onnxruntime's Gelu kernel computes)."""
    if op_available("Gelu", opset):
        return m.op.Gelu(x)
    op = m.op
    return op.Mul(op.Mul(x, m.k(0.5)), op.Add(op.Erf(op.Mul(x, m.k(SQRT_HALF))), m.k(1.0)))


def gelu_tanh(m: Any, x: Any, opset: int) -> Any:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): ONNX's Gelu(approximate="tanh") from opset 20,
    before it the formula in 8 nodes."""
    if op_available("Gelu", opset):
        return m.op.Gelu(x, approximate="tanh")
    op = m.op
    inner = op.Mul(op.Add(op.Mul(op.Mul(op.Mul(x, x), x), m.k(0.044715)), x), m.k(math.sqrt(2 / math.pi)))
    return op.Mul(op.Mul(x, m.k(0.5)), op.Add(op.Tanh(inner), m.k(1.0)))


def silu(m: Any, x: Any, opset: int) -> Any:
    """x * sigmoid(x) (SiLU, Swish with beta 1)."""
    return m.op.Mul(x, m.op.Sigmoid(x))


def sigmoid(m: Any, x: Any, opset: int) -> Any:
    return m.op.Sigmoid(x)


def erfc(m: Any, x: Any, opset: int) -> Any:
    return erfc_float32(m, x)


def normal_cdf(m: Any, x: Any, opset: int) -> Any:
    return normal_cdf_float32(m, x)

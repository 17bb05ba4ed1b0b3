"""XLA's CPU kernel for ``erf_inv`` (with XLA's ``log1p`` and float32 ``log`` inside), rebuilt op by
op so that ``jax.random.normal`` and the samplers built on it (``truncated_normal``, ``lognormal``,
``maxwell``, ``wald``, ...) draw JAX's numbers in onnxruntime. The ``log1p`` and ``log`` kernels are
not the lowerings of those primitives: they cost ~170 and ~70 ops against 9 and 1 (the lax README's
jax.random section has the figures); :func:`on_float32` applies any of them to a float32 tensor.

What XLA computes was read off its optimized HLO (``jax.jit(f).lower(x).compile().as_text()``) and
checked bit for bit against ``jax.jit`` on 2**20 inputs:

- ``erf_inv``: ``w = -log1p(x * -x)``, then M. Giles' polynomials ("Approximating the erfinv
  function", GPU Computing Gems, 2011), Horner from the highest coefficient, ``* x``; ``x * inf`` at
  ``|x| == 1``. float32: two branches (``w < 5``: in ``w - 2.5``, else in ``sqrt(w) - 3``); float64:
  three (``w < 6.25``: in ``w - 3.125``; ``w < 16``: in ``sqrt(w) - 3.25``; else ``sqrt(w) - 5``).
- ``log1p``: for ``|x| < sqrt(2) - 1`` the Cephes rational ``x - x**2/2 + x**3 * P(x)/Q(x)``, else
  ``log(1 + x)`` (float64 too, in this jaxlib: newer XLA narrows float64's range to
  ``x >= 1/sqrt(2) - 1``; measured here, the wide range matches).
- float32 ``log``: the Cephes/Eigen kernel: ``frexp``, the mantissa moved to ``[sqrt(1/2), sqrt(2))``,
  a degree-8 polynomial in three interleaved Horner chains, and ``e * ln 2`` added back in two parts
  (``-2.12194440e-4`` and ``0.693359375``). Inputs below the smallest normal float32 (zero and
  subnormals; XLA flushes them) give ``-inf``.
- XLA's CPU backend contracts every ``a * b + c`` of these kernels into one fused multiply-add (FMA).

float32 is carried in float64 tensors (:class:`F32InF64`): each value is a float32 number and each
op rounds once to float32. For ``+ - * /`` and ``sqrt`` that equals the float32 op (float64 has
more than 2 * 24 + 2 bits, so the double rounding is innocuous); an FMA is ``a * b`` (exact in
float64) ``+ c`` rounded to float64 then float32, which differs from one rounding only where the
float64 sum lands exactly on a float32 tie: not once in the 2**20 inputs checked. float32
``erf_inv``/``log1p``/``log`` are therefore bitwise XLA's (on an FMA machine: XLA without FMA rounds
each product, which these graphs do not follow).

float64 uses the same algorithms with plain float64 Mul/Add (an FMA in float64 has no cheap ONNX
form) and onnxruntime's float64 Log: within a few ulps of XLA, see the lax pack README.
"""

from __future__ import annotations

import math

import jax
import numpy as np
from jax2onnx.dtypes import F32, F64

from .float_bits import FORMATS, binade
from .transcendental import Math

# ---------------------------------------------------------------------------------------------
# Constants (mathematical tables: Cephes' log/log1p, Giles' erfinv).

#: Cephes' log polynomial, highest degree first (evaluated as three interleaved chains).
_LOG_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
          -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
#: ln 2 split in two: e * _LN2_LO joins the polynomial, e * _LN2_HI (exact) is added last.
_LN2_LO, _LN2_HI = -2.12194440e-4, 0.693359375
_SQRT_HALF = 0.707106781186547524

#: Cephes' log1p rational x**3 * P(x) / Q(x), highest degree first.
_LOG1P_P = (4.5270000862445199635215e-5, 4.9854102823193375972212e-1, 6.5787325942061044846969e0,
            2.9911919328553073277375e1, 6.0949667980987787057556e1, 5.7112963590585538103336e1,
            2.0039553499201281259648e1)
_LOG1P_Q = (1.0, 1.5062909083469192043167e1, 8.3047565967967209469434e1, 2.2176239823732856465394e2,
            3.0909872225312059774938e2, 2.1642788614495947685003e2, 6.0118660497603843919306e1)
_LOG1P_RANGE = math.sqrt(2.0) - 1.0

#: Giles' single-precision erfinv: w < 5 in (w - 2.5), else in (sqrt(w) - 3).
_GILES32_CENTRAL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
                    -0.00125372503, -0.00417768164, 0.246640727, 1.50140941)
_GILES32_TAIL = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
                 -0.0076224613, 0.00943887047, 1.00167406, 2.83297682)

#: Giles' double-precision erfinv: w < 6.25 in (w - 3.125), w < 16 in (sqrt(w) - 3.25), else in
#: (sqrt(w) - 5).
_GILES64_CENTRAL = (-3.6444120640178196996e-21, -1.685059138182016589e-19, 1.2858480715256400167e-18,
                    1.115787767802518096e-17, -1.333171662854620906e-16, 2.0972767875968561637e-17,
                    6.6376381343583238325e-15, -4.0545662729752068639e-14, -8.1519341976054721522e-14,
                    2.6335093153082322977e-12, -1.2975133253453532498e-11, -5.4154120542946279317e-11,
                    1.051212273321532285e-09, -4.1126339803469836976e-09, -2.9070369957882005086e-08,
                    4.2347877827932403518e-07, -1.3654692000834678645e-06, -1.3882523362786468719e-05,
                    0.0001867342080340571352, -0.00074070253416626697512, -0.0060336708714301490533,
                    0.24015818242558961693, 1.6536545626831027356)
_GILES64_MID = (2.2137376921775787049e-09, 9.0756561938885390979e-08, -2.7517406297064545428e-07,
                1.8239629214389227755e-08, 1.5027403968909827627e-06, -4.013867526981545969e-06,
                2.9234449089955446044e-06, 1.2475304481671778723e-05, -4.7318229009055733981e-05,
                6.8284851459573175448e-05, 2.4031110387097893999e-05, -0.0003550375203628474796,
                0.00095328937973738049703, -0.0016882755560235047313, 0.0024914420961078508066,
                -0.0037512085075692412107, 0.005370914553590063617, 1.0052589676941592334,
                3.0838856104922207635)
_GILES64_TAIL = (-2.7109920616438573243e-11, -2.5556418169965252055e-10, 1.5076572693500548083e-09,
                 -3.7894654401267369937e-09, 7.6157012080783393804e-09, -1.4960026627149240478e-08,
                 2.9147953450901080826e-08, -6.7711997758452339498e-08, 2.2900482228026654717e-07,
                 -9.9298272942317002539e-07, 4.5260625972231537039e-06, -1.9681778105531670567e-05,
                 7.5995277030017761139e-05, -0.00021503011930044477347, -0.00013871931833623122026,
                 1.0103004648645343977, 4.8499064014085844221)


# ---------------------------------------------------------------------------------------------
# float32 arithmetic carried in float64


class F32InF64:
    """float32 numbers in float64 tensors; every op rounds its result once to float32. ``shape``:
    the elementwise shape the kernel runs on (its Horner loops carry a tensor of it)."""

    def __init__(self, ctx, shape=()):
        self.ctx, self.op, self.m, self.shape = ctx, ctx.op, Math(ctx, F64), tuple(shape)

    def within(self, body):
        """The same arithmetic emitted into a loop body."""
        return type(self)(body, self.shape)

    def k(self, v: float):
        """A float32 constant (the float32 nearest ``v``, as XLA rounds its literals)."""
        return self.m.k(float(np.float32(v)))

    def flush(self, x):
        """XLA's CPU runs with subnormals flushed to zero (inputs and results): so do these."""
        op = self.op
        # -0.0 goes in Where's second branch: onnxruntime's Where returns +0.0 for a -0.0 in its first
        normal = op.GreaterOrEqual(op.Abs(x), self.k(2.0 ** FORMATS[F32].emin))
        return op.Where(normal, x, op.Mul(x, self.k(0.0)))

    def round(self, x):
        return self.ctx.cast(self.ctx.cast(x, F32), F64)

    def add(self, a, b):
        return self.round(self.op.Add(a, b))

    def mul(self, a, b):
        return self.round(self.op.Mul(a, b))

    def div(self, a, b):
        return self.round(self.op.Div(a, b))

    def sqrt(self, a):
        return self.round(self.op.Sqrt(a))

    def fma(self, a, b, c):
        """a * b + c as XLA's contracted FMA: the product of two float32 numbers is exact in float64."""
        return self.round(self.op.Add(self.op.Mul(a, b), c))


class F64Plain:
    """The same interface on float64 with ordinary float64 ops (no FMA: see the module doc)."""

    def __init__(self, ctx, shape=()):
        self.ctx, self.op, self.m, self.shape = ctx, ctx.op, Math(ctx, F64), tuple(shape)

    def within(self, body):
        return type(self)(body, self.shape)

    def k(self, v: float):
        return self.m.k(float(v))

    def add(self, a, b):
        return self.op.Add(a, b)

    def mul(self, a, b):
        return self.op.Mul(a, b)

    def div(self, a, b):
        return self.op.Div(a, b)

    def sqrt(self, a):
        return self.op.Sqrt(a)

    def fma(self, a, b, c):
        return self.op.Add(self.op.Mul(a, b), c)


def _horner_loop(f, p, t, tables, choose=None):
    """``p = p * t + c`` (one FMA) for each coefficient ``c`` of ``tables`` in turn, as one ``Scan``
    whose sequences are the tables: the same ops in the same order as unrolled, in a few nodes.
    Several tables: ``choose(*coefficients)`` picks an element's coefficient (the erf_inv branch).
    ``p`` has the kernel's full shape (the Scan's state keeps it)."""
    body = f.ctx.subgraph("horner")
    state = body.add_input("p", jax.ShapeDtypeStruct(f.shape, np.float64))
    coeffs = [body.add_input("coefficient", dtype=np.float64, shape=()) for _ in tables]
    inner = f.within(body)
    c = choose(inner, *coeffs) if choose is not None else coeffs[0]
    graph = body.finish([inner.fma(state, t, c)], [jax.ShapeDtypeStruct(f.shape, np.float64)])
    sequences = [f.ctx.const(np.array([float(np.float32(v)) if isinstance(f, F32InF64) else float(v) for v in tab]))
                 for tab in tables]
    return f.ctx.op.Scan(p, *sequences, body=graph, num_scan_inputs=len(tables), _outputs=1)


def _horner(f, coeffs, t):
    """XLA's EvaluatePolynomial: p = c0, then p = p * t + c (one FMA each); the first step unrolled
    (it broadcasts the constant to ``t``'s shape), the rest a loop."""
    return _horner_loop(f, f.fma(f.k(coeffs[0]), t, f.k(coeffs[1])), t, [coeffs[2:]])


def log_f32(f: F32InF64, x):
    """XLA's float32 log on float32 numbers ``x`` (carried in float64)."""
    op, ctx = f.op, f.ctx
    smallest = 2.0 ** FORMATS[F32].emin
    flushed = op.Less(op.Abs(x), f.k(smallest))  # zero and subnormals: XLA flushes them to zero
    safe = op.Where(op.Or(op.Less(x, f.k(smallest)), op.Or(op.IsInf(x), op.IsNaN(x))), f.k(1.0), x)
    exponent = op.Add(binade(f.m, safe, FORMATS[F32]), f.k(1.0))  # frexp: safe = mant * 2**exponent
    mant = op.Mul(safe, op.Pow(f.k(2.0), op.Neg(exponent)))  # in [0.5, 1), exact
    low = op.Less(mant, f.k(_SQRT_HALF))
    # [0.5, 1) -> [sqrt(1/2), sqrt(2)) minus 1: (mant - 1) + mant below sqrt(1/2); both steps exact
    r = op.Add(op.Sub(mant, f.k(1.0)), op.Where(low, mant, f.k(0.0)))
    e = op.Sub(exponent, ctx.cast(low, F64))
    r2 = f.mul(r, r)
    r3 = f.mul(r2, r)
    p = _LOG_P
    y = f.fma(f.fma(f.k(p[0]), r, f.k(p[1])), r, f.k(p[2]))
    y1 = f.fma(f.fma(f.k(p[3]), r, f.k(p[4])), r, f.k(p[5]))
    y2 = f.fma(f.fma(f.k(p[6]), r, f.k(p[7])), r, f.k(p[8]))
    y = f.fma(f.fma(y, r3, y1), r3, y2)
    # XLA contracts (y * r3) + (e * ln2_lo) with the first product fused, the second rounded.
    y = f.fma(y, r3, f.mul(e, f.k(_LN2_LO)))
    out = f.add(f.fma(r2, f.k(-0.5), r), y)
    out = f.fma(e, f.k(_LN2_HI), out)
    out = op.Where(flushed, f.k(-np.inf), out)
    out = op.Where(op.Less(x, f.k(-smallest)), f.k(np.nan), out)
    out = op.Where(op.Equal(x, f.k(np.inf)), x, out)
    return op.Where(op.IsNaN(x), x, out)


def log1p(f, x, *, double: bool):
    """XLA's log1p on ``x`` (float32 numbers in :class:`F32InF64`, or float64 in :class:`F64Plain`)."""
    op = f.op
    one_plus = f.add(x, f.k(1.0))
    large = log_f32(f, one_plus) if not double else op.Log(one_plus)
    x2 = f.mul(x, x)
    ratio = f.div(_horner(f, _LOG1P_P, x), _horner(f, _LOG1P_Q, x))
    small = f.mul(f.mul(x, x2), ratio)
    small = f.add(x, f.fma(f.k(-0.5), x2, small))
    far = op.GreaterOrEqual(op.Abs(x), f.k(_LOG1P_RANGE))
    return op.Where(far, large, small)  # small second: it carries log1p(-0.0) = -0.0 (see F32InF64.flush)


def erf_inv(f, x, *, double: bool):
    """XLA's erf_inv on ``x`` (carried as in :func:`log1p`)."""
    op = f.op
    w = op.Neg(log1p(f, f.mul(x, op.Neg(x)), double=double))
    if double:
        central, mid = op.Less(w, f.k(6.25)), op.Less(w, f.k(16.0))
        root = f.sqrt(w)
        t = op.Where(central, f.add(w, f.k(-3.125)), f.add(root, op.Where(mid, f.k(-3.25), f.k(-5.0))))
        # One Horner chain over the three tables, as XLA emits it: all start together, the shorter
        # ones keep their value once their coefficients run out.
        p = None
        for i, c in enumerate(_GILES64_CENTRAL):
            m_c = _GILES64_MID[i] if i < len(_GILES64_MID) else 0.0
            t_c = _GILES64_TAIL[i] if i < len(_GILES64_TAIL) else 0.0
            coeff = op.Where(central, f.k(c), op.Where(mid, f.k(m_c), f.k(t_c)))
            if p is None:
                p = coeff
                continue
            step = f.fma(p, t, coeff)
            if i < len(_GILES64_TAIL):
                p = step
            else:
                p = op.Where(mid if i < len(_GILES64_MID) else central, step, p)
    else:
        lt = op.Less(w, f.k(5.0))
        t = op.Where(lt, f.add(w, f.k(-2.5)), f.add(f.sqrt(w), f.k(-3.0)))
        p = op.Where(lt, f.k(_GILES32_CENTRAL[0]), f.k(_GILES32_TAIL[0]))
        p = _horner_loop(f, p, t, [_GILES32_CENTRAL[1:], _GILES32_TAIL[1:]],
                         choose=lambda inner, a, b: inner.op.Where(lt, a, b))
    r = f.mul(p, x)
    return op.Where(op.Equal(op.Abs(x), f.k(1.0)), op.Mul(x, f.k(np.inf)), r)


def on_float32(ctx, kernel, x):
    """``kernel`` (:func:`erf_inv` or :func:`log1p`) on a float32 tensor, flushed like XLA's CPU."""
    f = F32InF64(ctx, ctx.avals_in[0].shape)
    return ctx.cast(f.flush(kernel(f, f.flush(ctx.cast(x, F64)), double=False)), F32)


def on_float64(ctx, kernel, x):
    return kernel(F64Plain(ctx, ctx.avals_in[0].shape), x, double=True)


def ulp_tolerance(f32: float, f64: float, *, atol: float = 2.0**-126, atol_f64: float = 2.0**-1022) -> dict[str, float]:
    """Testcase tolerances admitting ``f32``/``f64`` ulps: ``|got - want| <= n * eps * |want|``
    (``eps`` = 2**-23 or 2**-52) holds for n ulps and fails for 2n + 1 at any normal ``want``.
    ``atol`` defaults to the smallest normal number (for results of zero); a result that cancels
    (``u * 5 - 2`` near 0) needs the ulp of the terms before the cancellation as ``atol`` instead."""
    return {"rtol": f32 * 2.0**-23, "atol": atol, "rtol_f64": f64 * 2.0**-52, "atol_f64": atol_f64}

"""lax cumulative reductions: cumsum (ONNX CumSum), cumprod/cummax/cummin/cumlogsumexp.

ONNX has only CumSum. The others are an inclusive prefix scan with an associative combine:
- static axis length n: the Hillis-Steele doubling chain, ceil(log2 n) steps of
  ``y = combine(y, y shifted by s along the axis, padded with the identity)`` for s = 1, 2, 4, ...
  Exact for max/min (no rounding) and the same products/log-adds a parallel scan forms;
- symbolic axis length: an ONNX Scan over the axis, carrying the running value.
``reverse`` scans from the end (the shift pads at the other side / Scan runs backwards).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from jax2onnx.dtypes import FLOAT_MATH, HALF_FLOATS
from jax2onnx.plugin import Kernels, Lowerings

from . import _numeric as nm
from . import complex_pairs as cp

lowerings = Lowerings()


def _cumsum(ctx, x):
    """CumSum along ``axis``; (real, imag) pairs sum part by part (the pair axis is last)."""
    return ctx.op.CumSum(x, ctx.i64(int(ctx.params["axis"])), reverse=int(bool(ctx.params["reverse"])))


@lowerings.register("cumsum", complex=_cumsum)
def lower_cumsum(ctx, x):
    # Wider ints wrap back exactly on the cast down, so any int may travel in int32/int64, uint64
    # in int64 too (an order-breaking carrier, which core's ``dtypes=`` facet does not pick).
    return nm.compute_in(ctx, [x], nm.dtype_of(ctx.avals_in[0]), ctx.kernel_dtypes("CumSum", without=HALF_FLOATS), lambda _c, y: _cumsum(ctx, y),
                         keep_order=False)


def _log1p_small(op, e):
    """log(1 + e) for e in [0, 1], accurate for tiny e: log(u) * e / (u - 1) with u = 1 + e."""
    u = op.Add(e, 1)
    ratio = op.Div(e, op.Sub(u, 1))
    return op.Where(op.Equal(u, 1), e, op.Mul(op.Log(u), ratio))


def _logaddexp(op, a, b):
    """max + log1p(exp(-|a - b|)); an infinite max is the answer itself (inf - inf would be NaN)."""
    m = op.Max(a, b)
    r = op.Add(m, _log1p_small(op, op.Exp(op.Neg(op.Abs(op.Sub(a, b))))))
    return op.Where(op.IsInf(m), m, r)


#: primitive -> (combine(op, a, b), identity(dtype), dtypes the combine runs on).
COMBINES: dict[str, tuple[Callable, Callable, frozenset | Kernels]] = {
    "cumprod": (lambda op, a, b: op.Mul(a, b), lambda d: 1, Kernels(("Mul", "Pad"))),
    "cummax": (lambda op, a, b: op.Max(a, b), nm.dtype_min, Kernels(("Max", "Pad"))),
    "cummin": (lambda op, a, b: op.Min(a, b), nm.dtype_max, Kernels(("Min", "Pad"))),
    "cumlogsumexp": (_logaddexp, lambda d: -np.inf, FLOAT_MATH),
}


def _doubling_scan(ctx, x, axis, n, reverse, combine, identity):
    op = ctx.op
    axes = ctx.i64([axis])
    y, shift = x, 1
    while shift < n:
        if reverse:
            kept = op.Slice(y, ctx.i64([shift]), ctx.i64([n]), axes)
            pads = [0, shift]
        else:
            kept = op.Slice(y, ctx.i64([0]), ctx.i64([n - shift]), axes)
            pads = [shift, 0]
        shifted = op.Pad(kept, ctx.i64(pads), identity, axes, mode="constant")
        y = combine(y, shifted)
        shift *= 2
    return y


def _scan_loop(ctx, x, axis, reverse, combine_fn, identity, c, slice_shape):
    """ONNX Scan over ``axis``: carry = combine(carry, x_t), emitted at every step."""
    body = ctx.subgraph("cumulative_body")
    carry = body.add_input("carry", dtype=c, shape=slice_shape)
    x_t = body.add_input("x_t", dtype=c, shape=slice_shape)
    new = combine_fn(body.op, carry, x_t)
    graph = body.finish([new, new])
    init = ctx.op.Expand(identity, ctx.shape_tensor(slice_shape))
    direction = [int(reverse)]
    # onnxruntime's Scan fails over zero iterations, and the symbolic axis may be empty: an If
    # returns the (empty) input as is then, and runs the Scan otherwise.
    scan = ctx.subgraph("cumulative_scan")
    _, out = scan.op.Scan(init, x, body=graph, num_scan_inputs=1, scan_input_axes=[axis], scan_output_axes=[axis],
                          scan_input_directions=direction, scan_output_directions=direction, _outputs=2)
    empty = ctx.subgraph("cumulative_empty")
    is_empty = ctx.op.Equal(ctx.dim_scalar(ctx.avals_in[0].shape[axis]), ctx.const(0, np.int64))
    return ctx.op.If(is_empty, then_branch=empty.finish([x], ctx.avals_out), else_branch=scan.finish([out], ctx.avals_out))


def _cumulative(prim: str):
    combine_fn, identity_of, _ = COMBINES[prim]

    def lower(ctx, x):
        axis, reverse = int(ctx.params["axis"]), bool(ctx.params["reverse"])
        shape = ctx.avals_in[0].shape
        dtype = nm.dtype_of(ctx.avals_in[0])  # the carrier the dtypes= facet chose
        identity = ctx.const(identity_of(dtype), dtype)
        n = shape[axis]
        if ctx.is_static([n]):
            return _doubling_scan(ctx, x, axis, int(n), reverse, lambda a, b: combine_fn(ctx.op, a, b), identity)
        slice_shape = [d for i, d in enumerate(shape) if i != axis]
        return _scan_loop(ctx, x, axis, reverse, combine_fn, identity, dtype, slice_shape)

    lower.__name__ = f"lower_{prim}"
    return lower


for _prim, (_combine, _identity, _types) in COMBINES.items():
    lowerings.add(_prim, _cumulative(_prim), dtypes=_types, complex=cp.unsupported)

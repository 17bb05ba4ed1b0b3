"""lax reductions: reduce_sum/prod/max/min (one ONNX Reduce op each), reduce_and/or/xor (bool:
ReduceMin/ReduceMax/parity; ints: per bit plane), argmax/argmin.

lax reductions never keep dims (``jnp``'s ``keepdims`` adds a broadcast_in_dim after). XLA propagates
NaN through max/min and ranks NaN above everything in argmax *and* argmin; onnxruntime's kernels do
neither reliably, so float inputs get an explicit NaN check.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.dtypes import (
    BOOL,
    HALF_FLOATS,
    I32,
    I64,
    U8,
    U64,
    bits,
    is_bool,
    is_float,
    is_int,
    unsigned_of,
)
from jax2onnx.plugin import Kernels, Lowerings

from . import _numeric as nm
from . import complex_pairs as cp
from .bitwise import bit_planes

lowerings = Lowerings()

def axes_const(ctx, axes):
    return ctx.i64(axes)


def _any_nan(ctx, x, axes):
    return ctx.op.ReduceMax(ctx.op.IsNaN(x), axes_const(ctx, axes), keepdims=0)


def _sum_or_prod(op_type: str):
    """Float sums/products are one ReduceSum/ReduceProd (float16/bfloat16 in float32). Integer ones
    are not: onnxruntime's integer ReduceSum/ReduceProd accumulate in double and saturate on the
    way back (an int32 sum that overflows gives INT_MAX, not XLA's wrapped value; an int64 sum past
    2**53 loses its low bits), so ints go through :func:`_int_sum` / :func:`_int_prod`."""

    def lower(ctx, x):
        axes = tuple(ctx.params["axes"])
        if not axes:  # ONNX would read empty axes as "all axes"
            return ctx.op.Identity(x)
        dtype = nm.dtype_of(ctx.avals_in[0])
        if is_int(dtype):
            return (_int_sum if op_type == "ReduceSum" else _int_prod)(ctx, x, axes, dtype)
        return nm.compute_in(ctx, [x], dtype, ctx.kernel_dtypes(op_type, without=HALF_FLOATS),
                             lambda _c, y: getattr(ctx.op, op_type)(y, axes_const(ctx, axes), keepdims=0),
                             keep_order=False)

    lower.__name__ = f"lower_{op_type.lower()}"
    return lower


#: onnxruntime's integer ReduceSum adds in double: exact while every partial sum stays below this
_EXACT = 2**53
_LIMB = 16


def _static_count(ctx, axes):
    shape = ctx.avals_in[0].shape
    dims = [shape[a] for a in axes]
    return int(np.prod(dims)) if all(isinstance(d, (int, np.integer)) for d in dims) else None


def _int_sum(ctx, x, axes, dtype):
    """An integer sum modulo 2**bits, as XLA computes it. The values are read as unsigned (the same
    sum modulo 2**bits) and split into 16-bit limbs; ReduceSum adds each limb's column in double
    exactly (below 2**37 elements), and MatMul, which wraps like XLA, puts the limbs back together
    in int64; the cast to the result dtype keeps the low bits. When the reduced size is static and
    small enough for the plain sum to stay exact, that is one int64 ReduceSum."""
    width = bits(dtype)
    count = _static_count(ctx, axes)
    if width <= 32 and count is not None and count * 2**width <= _EXACT:
        return ctx.cast(ctx.op.ReduceSum(ctx.cast(x, I64), axes_const(ctx, axes), keepdims=0), dtype)
    udtype = unsigned_of(dtype)
    xu = ctx.cast(x, udtype)
    if width <= _LIMB:
        return ctx.cast(ctx.op.ReduceSum(ctx.cast(xu, I64), axes_const(ctx, axes), keepdims=0), dtype)
    n = width // _LIMB
    shifts = ctx.const(np.arange(n) * _LIMB, udtype)
    limbs = ctx.op.BitwiseAnd(ctx.op.BitShift(ctx.op.Unsqueeze(xu, ctx.i64([-1])), shifts, direction="RIGHT"),
                              ctx.const(2**_LIMB - 1, udtype))  # [..., n]
    sums = ctx.op.ReduceSum(ctx.cast(limbs, I64), axes_const(ctx, axes), keepdims=0)  # [out..., n], exact
    weights = ctx.const(np.asarray([2 ** (_LIMB * i) for i in range(n)], np.int64), I64)
    return ctx.cast(ctx.op.MatMul(sums, weights), dtype)


def _int_prod(ctx, x, axes, dtype):
    """An integer product modulo 2**bits, with Mul (which wraps like XLA): a static reduced axis is
    halved until one is left (Mul of its two halves), a symbolic one is an ONNX Scan carrying the
    running product. Axes go from the last, so the ones left keep their positions."""
    shape = list(ctx.avals_in[0].shape)
    if any(isinstance(shape[a], (int, np.integer)) and shape[a] == 0 for a in axes):  # the empty product
        return ctx.op.Expand(ctx.const(1, dtype), ctx.shape_tensor(list(ctx.avals_out[0].shape)))
    for a in sorted(axes, reverse=True):
        if isinstance(shape[a], (int, np.integer)):
            n = int(shape[a])
            while n > 1:
                h = n // 2
                y = ctx.op.Mul(ctx.op.Slice(x, ctx.i64([0]), ctx.i64([h]), ctx.i64([a])),
                               ctx.op.Slice(x, ctx.i64([h]), ctx.i64([2 * h]), ctx.i64([a])))
                if n % 2:
                    y = ctx.op.Concat(y, ctx.op.Slice(x, ctx.i64([2 * h]), ctx.i64([n]), ctx.i64([a])), axis=a)
                x, n = y, h + n % 2
            x = ctx.op.Squeeze(x, ctx.i64([a]))
        else:
            x = _prod_scan(ctx, x, a, shape, dtype)
        del shape[a]
    return x


def _prod_scan(ctx, x, axis, shape, dtype):
    """The product along a symbolic ``axis``: Scan with carry = carry * x_t. A slice of ones goes
    first, so the Scan runs at least once (onnxruntime's Scan fails over zero iterations) and an
    empty axis gives the empty product, 1."""
    slice_shape = [d for i, d in enumerate(shape) if i != axis]
    ones = ctx.op.Expand(ctx.const(1, dtype), ctx.shape_tensor(slice_shape))
    x = ctx.op.Concat(ctx.op.Unsqueeze(ones, ctx.i64([axis])), x, axis=axis)
    body = ctx.subgraph("prod_body")
    carry = body.add_input("carry", dtype=dtype, shape=slice_shape)
    x_t = body.add_input("x_t", dtype=dtype, shape=slice_shape)
    graph = body.finish([body.op.Mul(carry, x_t)])
    return ctx.op.Scan(ones, x, body=graph, num_scan_inputs=1, scan_input_axes=[axis])


def _sum_complex(ctx, x):
    """A sum of (real, imag) pairs is the pair of sums (float parts: no carrier); the pair axis is
    never among the reduced axes."""
    axes = tuple(ctx.params["axes"])
    return ctx.op.ReduceSum(x, axes_const(ctx, axes), keepdims=0) if axes else ctx.op.Identity(x)


lowerings.add("reduce_sum", _sum_or_prod("ReduceSum"), complex=_sum_complex)
lowerings.add("reduce_prod", _sum_or_prod("ReduceProd"), complex=cp.unsupported)


@lowerings.register("reduce_max", "reduce_min", dtypes=Kernels(("ReduceMax", "ReduceMin"), also=frozenset({U64})), complex=cp.unsupported)
def lower_reduce_max_min(ctx, x):
    """XLA propagates NaN through max/min; onnxruntime's kernels do not reliably, so a float input
    gets an explicit NaN check. uint64 has no kernel and no wider carrier: it is reduced as int64
    with the sign bit flipped, a bijection that keeps the unsigned order."""
    axes = tuple(ctx.params["axes"])
    if not axes:
        return ctx.op.Identity(x)
    op_type = "ReduceMax" if ctx.primitive == "reduce_max" else "ReduceMin"
    if nm.dtype_of(ctx.avals_in[0]) == U64:
        key = _reduce_extreme(ctx, nm.uint64_order_key(ctx, x), axes, op_type)
        return ctx.cast(nm.uint64_order_key(ctx, key), U64)
    r = _reduce_extreme(ctx, x, axes, op_type)
    if is_float(ctx.avals_in[0].dtype):
        r = ctx.op.Where(_any_nan(ctx, x, axes), np.nan, r)
    return r


def _reduce_extreme(ctx, x, axes, op_type: str):
    """ReduceMax/ReduceMin over ``axes``. Where the target onnxruntime's int64 kernel is inexact
    (1.31, see jax2onnx.ir.runtime), an int64 operand's reduced axes are moved last and flattened
    into one, whose TopK(k=1) is the extreme (an empty or symbolic reduced axis keeps the op)."""
    shape = ctx.avals_in[0].shape
    exact = ctx.runtime.supports(op_type, I64, ctx.opset) or x.type is None or x.type.dtype.numpy() != I64
    if exact or not all(isinstance(shape[a], int) and shape[a] > 0 for a in axes):
        return getattr(ctx.op, op_type)(x, axes_const(ctx, axes), keepdims=0)
    kept = [a for a in range(len(shape)) if a not in axes]
    perm = kept + list(axes)
    moved = ctx.op.Transpose(x, perm=perm) if perm != list(range(len(shape))) else x
    # the reduced size is static: no -1, which onnxruntime cannot resolve when a kept dim is 0
    flat = ctx.op.Reshape(moved, ctx.shape_tensor([shape[a] for a in kept] + [int(np.prod([shape[a] for a in axes]))]))
    top, _ = ctx.op.TopK(flat, ctx.i64([1]), axis=-1, largest=int(op_type == "ReduceMax"), sorted=1, _outputs=2)
    return ctx.op.Squeeze(top, ctx.i64([-1]))


def _bitwise_reduction(ctx, x, axes, dtype, plane_reduce):
    """Reduce each bit plane, then reassemble the bits (distinct powers of two: their int64 sum is
    their OR, and the cast back to ``dtype`` wraps the top bit into place)."""
    width = bits(dtype)
    planes = plane_reduce(bit_planes(ctx, x, dtype), axes_const(ctx, axes))
    weights = [1 << k for k in range(min(width, 63))] + ([-(1 << 63)] if width == 64 else [])
    weighted = ctx.op.Mul(ctx.cast(planes, I64), ctx.const(weights, I64))
    total = ctx.op.ReduceSum(weighted, ctx.i64([-1]), keepdims=0)
    return ctx.cast(total, dtype)


def _parity(ctx, planes_or_bools, axes):
    count = ctx.op.ReduceSum(planes_or_bools, axes, keepdims=0)
    return ctx.op.BitwiseAnd(count, ctx.const(1, I32))


@lowerings.register("reduce_and", "reduce_or", "reduce_xor")
def lower_reduce_logical(ctx, x):
    axes = tuple(ctx.params["axes"])
    if not axes:
        return ctx.op.Identity(x)
    dtype = nm.dtype_of(ctx.avals_in[0])
    kind = ctx.primitive
    if is_bool(dtype) and kind != "reduce_xor":
        reduce = ctx.op.ReduceMin if kind == "reduce_and" else ctx.op.ReduceMax
        shape = ctx.avals_in[0].shape
        if all(isinstance(shape[a], int) and shape[a] > 0 for a in axes):
            return reduce(x, axes_const(ctx, axes), keepdims=0)
        # A reduced axis that may be empty: onnxruntime rejects a bool ReduceMax/Min over an
        # empty set, but reduces uint8 to the identities JAX gives (max 0 -> False, min 255 -> True).
        return ctx.cast(reduce(ctx.cast(x, np.dtype(np.uint8)), axes_const(ctx, axes), keepdims=0), BOOL)
    if is_bool(dtype):
        return ctx.cast(_parity(ctx, ctx.cast(x, I32), axes_const(ctx, axes)), BOOL)
    plane_reduce = {
        "reduce_and": lambda p, a: ctx.op.ReduceMin(p, a, keepdims=0),
        "reduce_or": lambda p, a: ctx.op.ReduceMax(p, a, keepdims=0),
        "reduce_xor": lambda p, a: _parity(ctx, p, a),
    }[kind]
    return _bitwise_reduction(ctx, x, axes, dtype, plane_reduce)


@lowerings.register("argmax", "argmin", dtypes=Kernels(("ArgMax", "ArgMin"), also=frozenset({U64})), complex=cp.unsupported)
def lower_argmax(ctx, x):
    """ONNX ArgMax/ArgMin return the first extreme index (ties like JAX) as int64, cast to
    ``index_dtype``. A NaN along the axis wins, in both, at its first position. uint64 is ranked
    by its order key (no uint64 kernel)."""
    (axis,) = ctx.params["axes"]
    index_dtype = np.dtype(ctx.params["index_dtype"])
    dtype = nm.dtype_of(ctx.avals_in[0])
    if dtype == U64:
        x = nm.uint64_order_key(ctx, x)
    op_type = "ArgMax" if ctx.primitive == "argmax" else "ArgMin"
    index = getattr(ctx.op, op_type)(x, axis=int(axis), keepdims=0, select_last_index=0)
    if is_float(dtype):
        is_nan = ctx.op.IsNaN(x)
        first_nan = ctx.op.ArgMax(ctx.cast(is_nan, U8), axis=int(axis), keepdims=0, select_last_index=0)
        index = ctx.op.Where(_any_nan(ctx, x, (axis,)), first_nan, index)
    return ctx.cast(index, index_dtype)

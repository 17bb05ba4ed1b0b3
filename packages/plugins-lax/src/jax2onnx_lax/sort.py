"""lax ``sort`` and ``top_k`` → ``TopK``.

``sort`` is a full ascending ``TopK(largest=0)`` over the axis; the other operands follow its
indices through ``GatherElements``. ONNX TopK keeps equal elements in index order, so it is a
stable sort, and several keys sort lexicographically by stable-sorting on the last key first and
on each earlier key after. A complex key (a ``(..., 2)`` real pair) is two keys, its real part then
its imaginary part (JAX's lexicographic order of complex numbers); complex operands move as pairs.
onnxruntime orders NaN after +inf, as JAX does (TopK(largest=1) puts it
first, as ``lax.top_k`` does); +0.0 and -0.0 compare equal in both.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from jax2onnx.dtypes import U8, U64, carrier, is_float
from jax2onnx.fusion import const_array
from jax2onnx.plugin import Kernels, Lowerings

from . import _numeric as nm
from . import complex_pairs as cp

lowerings = Lowerings()

#: Key dtypes sorted as they are: onnxruntime's TopK kernels, and uint64 through its order key;
#: other keys sort in a wider type with the same order (bool in uint8, uint16 in int32, uint32 in
#: int64, bfloat16 in float32).
TOPK_DTYPES = Kernels("TopK", also=frozenset({U64}))


def _key_parts(ctx, key, dtype) -> list:
    """The keys TopK sorts ``key`` by, most significant first. Usually the key itself (in a
    carrier TopK has a kernel for; uint64 by its order key). Where the target onnxruntime's TopK
    does not order NaN as the spec says (1.31, see jax2onnx.ir.runtime), a float key is two: its
    NaN-ness, then the number (NaN as 0)."""
    if np.dtype(dtype) == U64:
        return [nm.uint64_order_key(ctx, key)]
    key = ctx.cast(key, carrier(dtype, ctx.kernel_dtypes("TopK")))
    if not is_float(key.type.dtype.numpy()) or ctx.runtime.supports("TopK", key.type.dtype.numpy(), ctx.opset):
        return [key]
    is_nan = ctx.op.IsNaN(key)
    return [ctx.cast(is_nan, U8), ctx.op.Where(is_nan, 0.0, key)]


def _is_iota_along(value, shape, axis) -> bool:
    """``value`` is a constant holding ``arange`` along ``axis`` (what argsort sorts with its keys)."""
    arr = const_array(value) if isinstance(value, ir.Value) else None
    if arr is None or not all(isinstance(d, int) for d in shape):
        return False
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return arr.shape == tuple(shape) and bool(np.array_equal(arr, np.broadcast_to(np.arange(shape[axis]).reshape(view), shape)))


def _is_complex(dtype) -> bool:
    return np.dtype(dtype).kind == "c"


def _real_keys(ctx, key, dtype):
    """A key as the real keys it sorts by, most significant first: a complex key (a ``(..., 2)``
    pair) sorts by its real part, then its imaginary part, as JAX orders complex numbers."""
    if not _is_complex(dtype):
        return [(key, dtype)]
    part = np.dtype(np.float64 if np.dtype(dtype) == np.complex128 else np.float32)
    return [(ctx.op.Gather(key, ctx.i64(k), axis=-1), part) for k in (0, 1)]


def _gather_along(ctx, operand, order, axis, dtype):
    """``operand`` reordered by ``order`` along ``axis``; a complex pair moves both its parts."""
    if not _is_complex(dtype):
        return ctx.op.GatherElements(operand, order, axis=axis)
    both = ctx.op.Expand(ctx.op.Unsqueeze(order, ctx.i64([-1])), ctx.op.Shape(operand))
    return ctx.op.GatherElements(operand, both, axis=axis)


@lowerings.register("sort")
def lower_sort(ctx, *operands):
    p = ctx.params
    axis = int(p["dimension"])
    num_keys = int(p["num_keys"])
    shape = ctx.avals_in[0].shape
    size = ctx.dim(shape[axis])
    keys = [k for i in range(num_keys) for k in _real_keys(ctx, operands[i], ctx.avals_in[i].dtype)]
    order = None
    sorted_first_key = None
    for j in reversed(range(len(keys))):
        key, dtype = keys[j]
        parts = _key_parts(ctx, key, dtype)
        for part in reversed(parts):  # stable sorts, least significant key first
            part = part if order is None else ctx.op.GatherElements(part, order, axis=axis)
            values, step = ctx.op.TopK(part, size, axis=axis, largest=0, sorted=1, _outputs=2)
            order = step if order is None else ctx.op.GatherElements(order, step, axis=axis)
        if j == 0 and len(parts) == 1 and np.dtype(ctx.avals_in[0].dtype) in ctx.kernel_dtypes("TopK"):
            sorted_first_key = values  # the sorted key is the value
    outs = []
    for i, operand in enumerate(operands):
        aval = ctx.avals_in[i]
        if i == 0 and sorted_first_key is not None:
            outs.append(sorted_first_key)
        elif _is_iota_along(operand, aval.shape, axis):
            outs.append(ctx.cast(order, aval.dtype))
        else:
            outs.append(_gather_along(ctx, operand, order, axis, aval.dtype))
    return outs


@lowerings.register("top_k", dtypes=TOPK_DTYPES, complex=cp.unsupported)
def lower_top_k(ctx, x):
    rank = len(ctx.avals_in[0].shape)
    axis = int(ctx.params.get("axis", -1)) % rank  # JAX < 0.7 had no axis param: always the last
    u64 = np.dtype(ctx.avals_in[0].dtype) == U64
    values, indices = ctx.op.TopK(nm.uint64_order_key(ctx, x) if u64 else x, ctx.i64([int(ctx.params["k"])]),
                                  axis=axis, largest=1, sorted=1, _outputs=2)
    if u64:
        values = ctx.cast(nm.uint64_order_key(ctx, values), U64)
    return values, ctx.cast(indices, ctx.avals_out[1].dtype)

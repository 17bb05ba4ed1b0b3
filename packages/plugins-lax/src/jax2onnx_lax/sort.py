"""lax ``sort`` and ``top_k`` → ``TopK``.

``sort`` is a full ascending ``TopK(largest=0)`` over the axis; the other operands follow its
indices through ``GatherElements``. ONNX TopK keeps equal elements in index order, so it is a
stable sort, and several keys sort lexicographically by stable-sorting on the last key first and
on each earlier key after. onnxruntime orders NaN after +inf, as JAX does (TopK(largest=1) puts it
first, as ``lax.top_k`` does); +0.0 and -0.0 compare equal in both.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.dtypes import TOPK, U64, carrier
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from . import _numeric as nm
from . import complex_pairs as cp

lowerings = Lowerings()

#: Key dtypes sorted as they are: onnxruntime's TopK kernels (core's TOPK), and uint64 through its
#: order key; other keys sort in a wider type with the same order (bool in uint8, uint16 in int32,
#: uint32 in int64, bfloat16 in float32).
TOPK_DTYPES = TOPK | {U64}


def _sort_key(ctx, key, dtype):
    if np.dtype(dtype) == U64:
        return nm.uint64_order_key(ctx, key)
    return ctx.cast(key, carrier(dtype, TOPK))


def _is_iota_along(value, shape, axis) -> bool:
    """``value`` is a constant holding ``arange`` along ``axis`` (what argsort sorts with its keys)."""
    const = getattr(value, "const_value", None)
    if const is None or not all(isinstance(d, int) for d in shape):
        return False
    arr = const.numpy()
    view = [1] * len(shape)
    view[axis] = shape[axis]
    return arr.shape == tuple(shape) and bool(np.array_equal(arr, np.broadcast_to(np.arange(shape[axis]).reshape(view), shape)))


@lowerings.register("sort")
def lower_sort(ctx, *operands):
    p = ctx.params
    axis = int(p["dimension"])
    num_keys = int(p["num_keys"])
    shape = ctx.avals_in[0].shape
    size = ctx.dim(shape[axis])
    order = None
    sorted_first_key = None
    for i in reversed(range(num_keys)):
        key = operands[i] if order is None else ctx.op.GatherElements(operands[i], order, axis=axis)
        values, step = ctx.op.TopK(_sort_key(ctx, key, ctx.avals_in[i].dtype), size, axis=axis, largest=0, sorted=1,
                                   _outputs=2)
        order = step if order is None else ctx.op.GatherElements(order, step, axis=axis)
        if i == 0 and np.dtype(ctx.avals_in[0].dtype) in TOPK:  # the sorted key is the value
            sorted_first_key = values
    outs = []
    for i, operand in enumerate(operands):
        aval = ctx.avals_in[i]
        if i == 0 and sorted_first_key is not None:
            outs.append(sorted_first_key)
        elif _is_iota_along(operand, aval.shape, axis):
            outs.append(ctx.cast(order, aval.dtype))
        else:
            outs.append(ctx.op.GatherElements(operand, order, axis=axis))
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


# ---------------------------------------------------------------------------------------------
# testcases


def _ints(shape, dtype=jnp.int32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _small_ints(rng, shape, dtype):
    """Few distinct values, so ties (and the stability they test) are common."""
    return rng.integers(0, 3, size=shape).astype(dtype)


_NAN_INPUT = np.array([[1.0, np.nan, -np.inf, 3.0, 0.5, np.inf, -2.0, np.nan]], dtype=np.float32)

components = [
    Component(
        name="lax.sort",
        onnx=["TopK", "GatherElements"],
        since="v0.2.0",
        testcases=[
            Testcase("sort_1d", lambda x: lax.sort(x), [("N",)], expected_ops=["TopK"], max_nodes=2),
            Testcase("sort_2d", lambda x: lax.sort(x, dimension=0), [("B", 3)], expected_ops=["TopK"]),
            Testcase("sort_3d_middle_axis", lambda x: jnp.sort(x, axis=1), [(2, "N", 3)], expected_ops=["TopK"]),
            Testcase("sort_with_values", lambda k, v: lax.sort((k, v), dimension=1, num_keys=1),
                     [("B", 5), ("B", 5)], expected_ops=["TopK", "GatherElements"]),
            Testcase("sort_two_keys_lexicographic", lambda a, b, v: lax.sort((a, b, v), num_keys=2, is_stable=True),
                     [_ints(("N",)), _ints(("N",)), ("N",)], input_generator=_small_ints, static_sizes={"N": 9},
                     expected_ops=["TopK", "GatherElements"]),
            Testcase("sort_int32_stable_ties", lambda k, v: lax.sort((k, v), num_keys=1, is_stable=True),
                     [_ints(("N",)), ("N",)], input_generator=_small_ints, static_sizes={"N": 8}),
            Testcase("sort_uint32_keys", lambda k, v: lax.sort((k, v), num_keys=1, is_stable=True),
                     [_ints(("N",), jnp.uint32), ("N",)], expected_ops=["TopK", "Cast"]),
            Testcase("sort_bool_keys", lambda k, v: lax.sort((k, v), num_keys=1, is_stable=True),
                     [_ints(("N",), jnp.bool_), ("N",)]),
            Testcase("sort_nan_last", lambda x: jnp.sort(x, axis=-1), [], input_values=[_NAN_INPUT]),
            Testcase("argsort", lambda x: jnp.argsort(x, axis=-1), [("B", 6)], expected_ops=["TopK"]),
            Testcase("argsort_ties", lambda x: jnp.argsort(x, axis=0, stable=True), [_ints(("N", 2))],
                     input_generator=_small_ints, static_sizes={"N": 7}),
        ],
    ),
    Component(
        name="lax.top_k",
        onnx=["TopK"],
        since="v0.2.0",
        testcases=[
            Testcase("top_k", lambda x: lax.top_k(x, 3), [("B", 6)], expected_ops=["TopK"]),
            Testcase("top_k_uint64", lambda x: lax.top_k(x, 2),
                     input_values=[np.asarray([[0, 2**63 + 5, 2**64 - 1, 7], [2**63, 1, 2**63 - 1, 2**62]], np.uint64)]),
            Testcase("sort_uint64_with_payload", lambda x: lax.sort((x, jnp.broadcast_to(jnp.arange(4), x.shape)), num_keys=1)[1],
                     input_values=[np.asarray([[0, 2**63 + 5, 2**64 - 1, 7], [2**63, 1, 2**63 - 1, 2**62]], np.uint64)]),
            Testcase("top_k_int32_ties", lambda x: lax.top_k(x, 4), [_ints(("B", 7))], input_generator=_small_ints,
                     expected_ops=["TopK"]),
            Testcase("top_k_uint16", lambda x: lax.top_k(x, 2), [_ints(("B", 5), jnp.uint16)], expected_ops=["TopK"]),
            Testcase("top_k_nan", lambda x: lax.top_k(x, 5), [], input_values=[_NAN_INPUT]),
        ],
    ),
]

"""``jnp.sort`` / ``jnp.argsort`` → TopK over the whole axis; ``argmax``/``argmin`` are lax
primitives (ArgMax/ArgMin from the lax pack), documented and tested here.

TopK with k = the axis size is a full sort. onnxruntime's TopK is stable (equal keys keep their
index order, ascending and descending), which is what ``stable=True`` (JAX's default) promises;
an unstable request declines. NaN ordering is not specified by ONNX, JAX puts NaN last.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.dtypes import TOPK
from jax2onnx.plugin import Lowerings, is_array
from jax2onnx.testing import Component, Testcase

from ._common import is_static_int, mark, mark_name, patches_for
from .cases.helpers import grad_of_sum

lowerings = Lowerings()


def _sort_region(original, a, **params):
    return original(a, **params)


def _make_sort(name, original):
    region = functools.partial(_sort_region, original)

    @functools.wraps(original)
    def sort(a, axis=-1, **kwargs):
        stable, descending = kwargs.get("stable", True), kwargs.get("descending", False)
        if (
            is_array(a)
            and np.ndim(a) >= 1
            and a.dtype != np.bool_
            and (axis is None or is_static_int(axis))
            and set(kwargs) <= {"kind", "order", "stable", "descending"}
            and kwargs.get("kind") is None
            and kwargs.get("order") is None
            and stable is True
            and isinstance(descending, bool)
        ):
            params = {"axis": axis if axis is None else int(axis) % np.ndim(a), "descending": descending}
            return mark(name, region, a, **params)
        return original(a, axis, **kwargs)

    return sort


def _topk(ctx, x):
    """TopK on the input as it is, or None (decline: the lax body sorts in a carrier dtype) when
    onnxruntime has no TopK kernel for its dtype."""
    if np.dtype(ctx.avals_in[0].dtype) not in TOPK:
        return None
    p = ctx.marked.params
    shape = list(ctx.avals_in[0].shape)
    axis = p["axis"]
    if axis is None:  # numpy semantics: sort the flattened array
        x = ctx.op.Reshape(x, ctx.i64([-1]))
        k = ctx.op.Size(x) if not ctx.is_static(shape) else ctx.i64(int(np.prod(shape)))
        k = ctx.op.Reshape(k, ctx.i64([1]))
        axis = 0
    else:
        k = ctx.dim(shape[axis])
    return ctx.op.TopK(x, k, axis=axis, largest=int(p["descending"]), sorted=1, _outputs=2)


@lowerings.register_call(mark_name("sort"))
def lower_sort(ctx, x):
    found = _topk(ctx, x)
    return None if found is None else found[0]


@lowerings.register_call(mark_name("argsort"))
def lower_argsort(ctx, x):
    found = _topk(ctx, x)
    return None if found is None else ctx.cast(found[1], ctx.avals_out[0].dtype)


patches = patches_for("jax.numpy", ["sort", "argsort"], _make_sort)


# ---------------------------------------------------------------------------------------------
# testcases


def _ties(rng, shape, dtype):
    """Few distinct values, so stability is exercised."""
    return rng.integers(0, 3, size=shape).astype(dtype)


#: uint64 on both sides of 2**63 (the x64 variants; JAX narrows them to uint32 without x64)
_U64_ROWS = np.asarray([[0, 2**63 + 5, 2**64 - 1, 7, 2**63 + 5], [2**63, 1, 2**63 - 1, 2**62, 1]], np.uint64)


def _argsort_rows(x):
    return jnp.argsort(x, axis=-1)


components = [
    Component(name="jnp.sort", onnx=["TopK"], since="v0.5.2", testcases=[
        Testcase("sort_1d", lambda x: jnp.sort(x), [(5,)], expected_ops=["TopK"]),
        Testcase("sort_2d_axis0", lambda x: jnp.sort(x, axis=0), [("B", 3)], expected_ops=["TopK"]),
        Testcase("sort_descending", lambda x: jnp.sort(x, axis=1, descending=True), [("B", 4)],
                 expected_ops=["TopK"]),
        Testcase("sort_flat", lambda x: jnp.sort(x, axis=None), [("B", 3)], expected_ops=["TopK"]),
        Testcase("sort_int", lambda x: jnp.sort(x), [jax.ShapeDtypeStruct(("B", 4), jnp.int32)],
                 expected_ops=["TopK"]),
        Testcase("sort_vmap", jax.vmap(lambda x: jnp.sort(x, axis=0)), [("B", 3, 4)]),
        Testcase("sort_grad", grad_of_sum(lambda x: jnp.sort(x, axis=-1)), [("B", 4)]),
        # no TopK kernel for uint16/32/64: the fused form declines and the lax body sorts by a key
        Testcase("sort_uint32", lambda x: jnp.sort(x, axis=1), [jax.ShapeDtypeStruct(("B", 5), jnp.uint32)],
                 input_generator=lambda rng, shape, dtype: rng.integers(0, 2**32, size=shape).astype(dtype)),
        Testcase("sort_uint64", lambda x: jnp.sort(x, axis=1), input_values=[_U64_ROWS]),
    ]),
    Component(name="jnp.argsort", onnx=["TopK"], since="v0.7.0", testcases=[
        Testcase("argsort", _argsort_rows, [("B", 6)], expected_ops=["TopK"], input_generator=_ties),
        Testcase("argsort_descending", lambda x: jnp.argsort(x, axis=0, descending=True), [(6, "B")],
                 expected_ops=["TopK"], input_generator=_ties),
        Testcase("argsort_vmap", jax.vmap(_argsort_rows), [("B", 2, 6)], input_generator=_ties),
        Testcase("argsort_uint64", _argsort_rows, input_values=[_U64_ROWS]),
    ]),
    Component(name="jnp.argmax", onnx=["ArgMax"], since="v0.7.0", testcases=[
        Testcase("argmax", lambda x: jnp.argmax(x, axis=1), [("B", 4)], expected_ops=["ArgMax"]),
        Testcase("argmax_keepdims", lambda x: jnp.argmax(x, axis=0, keepdims=True), [(4, "B")],
                 expected_ops=["ArgMax"]),
        Testcase("argmax_ties", lambda x: jnp.argmax(x, axis=-1), [("B", 6)], expected_ops=["ArgMax"],
                 input_generator=_ties, description="the first maximum wins, as in JAX"),
    ]),
    Component(name="jnp.argmin", onnx=["ArgMin"], since="v0.7.0", testcases=[
        Testcase("argmin", lambda x: jnp.argmin(x, axis=1), [("B", 4)], expected_ops=["ArgMin"]),
        Testcase("argmin_keepdims", lambda x: jnp.argmin(x, axis=-1, keepdims=True), [("B", 6)],
                 expected_ops=["ArgMin"], input_generator=_ties),
    ]),
]

"""``jnp.sort`` / ``jnp.argsort`` → TopK over the whole axis; ``argmax``/``argmin`` are lax
primitives (ArgMax/ArgMin from the lax pack), documented and tested here.

TopK with k = the axis size is a full sort. onnxruntime's TopK is stable (equal keys keep their
index order, ascending and descending), which is what ``stable=True`` (JAX's default) promises;
an unstable request declines. NaN ordering is not specified by ONNX, JAX puts NaN last.
"""

from __future__ import annotations

import functools

import numpy as np
from jax2onnx.plugin import Lowerings, is_array

from ._common import along_axis, is_static_int, mark, mark_name, patches_for

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
    """TopK on the input as it is, or None (decline: the lax body sorts in a carrier dtype, or by
    NaN-ness then value) when the target onnxruntime has no exact TopK kernel for its dtype."""
    dtype = np.dtype(ctx.avals_in[0].dtype)
    if dtype not in ctx.kernel_dtypes("TopK") or not ctx.runtime.supports("TopK", dtype, ctx.opset):
        return None
    p = ctx.marked.params
    x, k, axis = along_axis(ctx, x, p["axis"])  # axis=None: sort the flattened array
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

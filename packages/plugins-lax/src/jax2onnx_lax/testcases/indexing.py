"""Testcases of :mod:`jax2onnx_lax.indexing` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import inspect

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase


def _idx(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


def _ints_between(lo, hi):
    """Integer inputs drawn from [lo, hi) (floats stay normal): set the range past the operand's
    size to exercise clamping / fill, or inside it for PROMISE_IN_BOUNDS cases. The first index
    vector is all 0 and the last all ``hi - 1``, so each run has an in-range and an edge value."""

    def gen(rng, shape, dtype):
        if np.dtype(dtype).kind not in "iu":
            return rng.standard_normal(shape).astype(dtype)
        a = rng.integers(lo, hi, size=shape)
        if a.size:  # first and last index vectors (along the last axis) set whole
            lead = (0,) * (a.ndim - 1) if a.ndim > 1 else (0,)
            a[lead] = 0
            a[tuple(-1 for _ in lead)] = hi - 1
        return a.astype(dtype)

    return gen


# The jnp pack fuses jnp.take / take_along_axis (it recognizes their jitted calls in the trace).
# These cases test the lax gather lowering, so they index without those jits: take's fill-mode
# gather through ``.at[].get``, take_along_axis's own code unjitted (inspect.unwrap).
def _take(x, i, axis):
    return jnp.asarray(x).at[(slice(None),) * axis + (i,)].get(mode="fill")


_take_along_axis = inspect.unwrap(jnp.take_along_axis)


def _gather(x, idx, **kw):
    kw.setdefault("mode", lax.GatherScatterMode.CLIP)
    return lax.gather(x, idx, **kw)


_GDN = lax.GatherDimensionNumbers


components = [
    Component(
        name="lax.gather",
        onnx=["Gather", "GatherElements", "GatherND", "Slice"],
        since="v0.2.0",
        testcases=[
            Testcase("gather_static", lambda x: x[jnp.array([2, 0, 1, 2])], [(3, 4)]),
            # x[:, idx] with a symbolic batch: one Gather on axis 1.
            Testcase("gather_dynamic_batch_simple_index", lambda x, i: x[:, i], [("B", 5), _idx(3)],
                     input_generator=_ints_between(0, 5), expected_ops=["Gather"], forbidden_ops=["GatherND"]),
            Testcase("gather_rows", lambda x, i: x[i], [(6, 3), _idx("B")], input_generator=_ints_between(0, 6),
                     expected_ops=["Gather"]),
            # Rows of a symbolic-length table: the clamp bound B - 1 comes from the input's shape.
            Testcase("gather_rows_symbolic_table", lambda x, i: jnp.asarray(x)[i], [("B", 3), _idx(4)],
                     input_generator=_ints_between(0, 7), expected_ops=["Gather", "Shape"], run_static=False),
            Testcase("gather_ellipsis_last_axis", lambda x, i: x[..., i], [("B", 2, 5), _idx(2, 3)],
                     input_generator=_ints_between(0, 5), expected_ops=["Gather"]),
            # jnp.take defaults to mode="fill": indices past either end give NaN rows.
            Testcase("gather_take_fill", lambda x, i: _take(x, i, axis=1), [("B", 5), _idx(4)],
                     input_generator=_ints_between(-6, 6), expected_ops=["Gather", "Where"]),
            Testcase("gather_at_get_fill_value", lambda x, i: jnp.asarray(x).at[i].get(mode="fill", fill_value=-1.0),
                     [(5, 3), _idx("B")], input_generator=_ints_between(-6, 6), expected_ops=["Where"]),
            Testcase("gather_at_get_clip", lambda x, i: jnp.asarray(x).at[i].get(mode="clip"), [(5, 3), _idx("B")],
                     input_generator=_ints_between(-8, 8), expected_ops=["Gather"]),
            Testcase("gather_fill_int32", lambda x, i: _take(x, i, axis=0), [_idx(5, 2), _idx("B")],
                     input_generator=_ints_between(-8, 8), expected_ops=["Where"]),
            Testcase("gather_take_along_axis", lambda x, i: _take_along_axis(x, i, axis=1), [("B", 5), _idx("B", 3)],
                     input_generator=_ints_between(-6, 6), expected_ops=["GatherElements"]),
            Testcase("gather_take_along_axis_3d", lambda x, i: _take_along_axis(x, i, axis=1, mode="clip"),
                     [(2, 5, "B"), _idx(2, 3, "B")], input_generator=_ints_between(-6, 6),
                     expected_ops=["GatherElements"]),
            # x[i, j] with two index arrays: a depth-2 GatherND.
            Testcase("gather_two_index_arrays", lambda x, i, j: x[i, j], [(4, 5, "B"), _idx(3), _idx(3)],
                     input_generator=_ints_between(0, 4), expected_ops=["GatherND"]),
            # x[i, 1:3]: a static window along a second indexed axis.
            Testcase("gather_index_and_window", lambda x, i: x[i, 1:3], [(4, 5, "B"), _idx(2)],
                     input_generator=_ints_between(0, 4), expected_ops=["GatherND"]),
            # x[1:] on a symbolic axis is a gather with window size B - 1 and no index batch dims.
            Testcase("gather_symbolic_window", lambda x: x[1:], [("B", 3)], expected_ops=["Slice"],
                     forbidden_ops=["Gather", "GatherND"]),
            # vmap of dynamic_slice: operand batching dims + a window along the indexed axis, CLIP.
            Testcase("gather_batched_windows",
                     lambda x, i: jax.vmap(lambda r, j: lax.dynamic_slice_in_dim(r, j, 2))(x, i),
                     [("B", 5), _idx("B")], input_generator=_ints_between(-3, 8), expected_ops=["GatherND"]),
            # Batching dims in the middle of the operand and of the indices.
            Testcase("gather_batching_dims_middle",
                     lambda x, i: _gather(x, i, dimension_numbers=_GDN(offset_dims=(2,), collapsed_slice_dims=(0,),
                                                                       start_index_map=(0,), operand_batching_dims=(1,),
                                                                       start_indices_batching_dims=(1,)),
                                          slice_sizes=(1, 1, 2)),
                     [(4, "B", 2), _idx(3, "B", 1)], input_generator=_ints_between(-2, 6), expected_ops=["GatherND"]),
            # Only batching dims, nothing indexed: the index-free GatherND path.
            Testcase("gather_full_window_batched",
                     lambda x, i: _gather(x, i, dimension_numbers=_GDN(offset_dims=(1,), collapsed_slice_dims=(),
                                                                       start_index_map=(1,), operand_batching_dims=(0,),
                                                                       start_indices_batching_dims=(0,)),
                                          slice_sizes=(1, 4), mode=lax.GatherScatterMode.FILL_OR_DROP),
                     [("B", 4), _idx("B", 1)], input_generator=_ints_between(-1, 2), expected_ops=["GatherND"]),
            Testcase("gather_fill_bool", lambda m, i: _take(m, i, axis=0), [jax.ShapeDtypeStruct((5, "B"), jnp.bool_),
                     _idx(3)], input_generator=_ints_between(-6, 7), expected_ops=["Gather", "Or"]),
            Testcase("gather_fill_window_2d",
                     lambda x, i: _gather(x, i, dimension_numbers=_GDN(offset_dims=(1, 2), collapsed_slice_dims=(),
                                                                       start_index_map=(0, 1)),
                                          slice_sizes=(2, 2), mode=lax.GatherScatterMode.FILL_OR_DROP),
                     [(4, 5), _idx("B", 2)], input_generator=_ints_between(-1, 4), expected_ops=["GatherND", "Where"]),
        ],
    ),
]

"""Testcases of :mod:`jax2onnx_lax.scatter` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase


def _idx(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


def _distinct(values):
    """Distinct integer indices taken from ``values`` (a set-scatter with repeated indices has no
    defined result): the first one always first and, when two or more are drawn, the last one
    always last, the rest shuffled. Floats stay normal."""

    def gen(rng, shape, dtype):
        if np.dtype(dtype).kind not in "iu":
            return rng.standard_normal(shape).astype(dtype)
        n = int(np.prod(shape))
        middle = list(rng.permutation(values[1:-1])) if len(values) > 2 else []
        vals = [values[0]] + middle[: max(n - 2, 0)] + ([values[-1]] if n >= 2 else [])
        return np.asarray(vals[:n], dtype=dtype).reshape(shape)

    return gen


def _unique_ints(lo, hi):
    """Distinct indices from [lo, hi), first 0, last ``hi - 1`` (past the end when ``hi`` exceeds
    the dim, so FILL_OR_DROP cases always keep something and drop something)."""
    return _distinct([0] + [v for v in range(lo, hi) if v not in (0, hi - 1)] + [hi - 1])


def _ints(lo, hi):
    """Integer indices from [lo, hi), repeats allowed (reducing scatters accumulate them)."""

    def gen(rng, shape, dtype):
        if np.dtype(dtype).kind not in "iu":
            return rng.standard_normal(shape).astype(dtype)
        return rng.integers(lo, hi, size=shape).astype(dtype)

    return gen


_SDN = lax.ScatterDimensionNumbers


_MODE = lax.GatherScatterMode


_ROWS = _SDN(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))


_POINTS = _SDN(update_window_dims=(), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,))


# A window along the indexed axis 1 that spans the other axes (JAX-Fluids writes halo/cell blocks so).
_BLOCK_AXIS1 = _SDN(update_window_dims=(0, 1, 2, 3), inserted_window_dims=(), scatter_dims_to_operand_dims=(1,))


_put_along_axis = jnp.put_along_axis  # the plain jnp function, should a pack fuse it while exporting


def _at(x):
    return jnp.asarray(x).at


components = [
    Component(
        name="lax.scatter",
        onnx=["ScatterND"],
        since="v0.4.4",
        testcases=[
            Testcase("scatter_set_axis0", lambda x, i, u: lax.scatter(x, i, u, _ROWS, mode=_MODE.CLIP),
                     [(6, "B"), _idx(3, 1), (3, "B")], input_generator=_distinct([0, 1, 2, 3, 8]), expected_ops=["ScatterND"]),
            # x.at[:, idx].set(v): the indexed axis is in the middle, out-of-range columns dropped.
            Testcase("scatter_set_middle", lambda x, i, u: _at(x)[:, i].set(u),
                     [("B", 5, 2), _idx(3), ("B", 3, 2)], input_generator=_unique_ints(0, 7),
                     expected_ops=["ScatterND", "Transpose"]),
            # The index targets axis 1 while the update window runs along axis 0.
            Testcase("scatter_correct_axis_determination",
                     lambda x, i, u: lax.scatter(x, i, u, _SDN(update_window_dims=(0,), inserted_window_dims=(1,),
                                                               scatter_dims_to_operand_dims=(1,))),
                     [("B", 4), _idx(1), ("B",)], input_generator=_distinct([3]), expected_ops=["ScatterND"]),
            # The update window covers only the first 3 of 6 entries of a dim that is not indexed.
            Testcase("scatter_updates_slice_needed_axis0",
                     lambda x, i, u: lax.scatter(x, i, u, _ROWS, mode=_MODE.FILL_OR_DROP),
                     [(5, 6), _idx("N", 1), ("N", 3)], input_generator=_unique_ints(0, 7),
                     expected_ops=["ScatterND"]),
            # Scalar updates reshaped to the index batch shape (1, 1, 1): three index batch dims.
            Testcase("scatter_from_user_warning_shapes_valid_jax",
                     lambda x, i, u: lax.scatter(x, i, jnp.reshape(u, i.shape[:-1]), _POINTS),
                     [(5,), _idx(1, 1, 1, 1), (1,)], input_generator=_unique_ints(0, 5), expected_ops=["ScatterND"]),
            Testcase("scatter_user_error_scenario_precise",
                     lambda x, i, u: lax.scatter(x, i, u, _SDN(update_window_dims=(1, 2, 3), inserted_window_dims=(0,),
                                                               scatter_dims_to_operand_dims=(0,)),
                                                 mode=_MODE.FILL_OR_DROP, unique_indices=False, indices_are_sorted=False),
                     [(5, "B", 1, 1), _idx(2, 1), (2, "B", 1, 1)], input_generator=_unique_ints(-2, 7),
                     expected_ops=["ScatterND", "Pad"]),
            # The indexed axis is symbolic: bounds, padding and the final crop all follow B.
            Testcase("scatter_set_symbolic_axis", lambda x, i, v: _at(x)[i].set(v), [("B", 3), _idx(2), (2, 3)],
                     input_generator=_unique_ints(0, 6), expected_ops=["ScatterND", "Shape"], run_static=False),
            Testcase("scatter_at_set_scalar_index", lambda x, v: _at(x)[1].set(v), [("B", 3), (3,)],
                     expected_ops=["ScatterND"], static_sizes={"B": 4}),
            # vmap of x.at[i].set(v): operand batching dims become an iota index column.
            Testcase("scatter_batched_vmap", lambda x, i, v: jax.vmap(lambda r, j, w: _at(r)[j].set(w))(x, i, v),
                     [("B", 5), _idx("B"), ("B",)], input_generator=_unique_ints(0, 7), expected_ops=["ScatterND"]),
            Testcase("scatter_put_along_axis", lambda x, i, v: _put_along_axis(x, i, v, axis=1, inplace=False),
                     [(2, 6), _idx(2, 1), (2, 1)], input_generator=_unique_ints(0, 7), expected_ops=["ScatterND"]),
            Testcase("scatter_int32_operand", lambda x, i, u: lax.scatter(x, i, u, _POINTS, mode=_MODE.FILL_OR_DROP),
                     [_idx(6), _idx("N", 1), _idx("N")], input_generator=_unique_ints(-1, 8),
                     expected_ops=["ScatterND"]),
        ],
    ),
    Component(
        name="lax.scatter_add",
        onnx=["ScatterND"],
        since="v0.5.3",
        testcases=[
            Testcase("scatter_add_simple_1d", lambda x, i, u: lax.scatter_add(x, i, u, _POINTS),
                     [(5,), _idx("N", 1), ("N",)], input_generator=_ints(-1, 7), expected_ops=["ScatterND"]),
            Testcase("scatter_add_window_2d_operand_1d_indices", lambda x, i, u: lax.scatter_add(x, i, u, _ROWS),
                     [(4, "B"), _idx(1, 1), (1, "B")], input_generator=_ints(0, 4), expected_ops=["ScatterND"]),
            Testcase("scatter_add_batch_updates_1d_operand", lambda x, i, u: lax.scatter_add(x, i, u, _POINTS),
                     [(5,), _idx("N", 2, 1), ("N", 2)], input_generator=_ints(0, 5), expected_ops=["ScatterND"]),
            # Block updates at a traced offset along axis 1. FILL_OR_DROP: a block starting at 5 would
            # run off the end (12 < 5 + 8), so it is dropped whole. CLIP (report2): a start of -3 is
            # clamped to 0. The fluids case writes a block at the last valid start.
            Testcase("scatter_add_mismatched_window_dims_from_user_report",
                     lambda x, i, u: lax.scatter_add(x, i, u, _BLOCK_AXIS1),
                     [("B", 12, 1, 1), _idx(1), ("B", 8, 1, 1)], input_generator=_distinct([5]),
                     expected_ops=["ScatterND"]),
            Testcase("scatter_add_mismatched_window_dims_from_user_report2",
                     lambda x, i, u: lax.scatter_add(x, i, u, _BLOCK_AXIS1, mode=_MODE.CLIP),
                     [(3, 10, 1, "B"), _idx(1), (3, 6, 1, "B")], input_generator=_distinct([-3]),
                     expected_ops=["ScatterND"]),
            Testcase("scatter_add_mismatched_window_dims_from_user_report3",
                     lambda x, i, u: lax.scatter_add(x, i, u, _BLOCK_AXIS1, mode=_MODE.PROMISE_IN_BOUNDS),
                     [(4, 9, 1, 1), _idx(1), (4, 5, 1, 1)], input_generator=_distinct([2]), expected_ops=["ScatterND"]),
            Testcase("scatter_add_fluids_pattern_updates_5_4_1_1",
                     lambda x, i, u: lax.scatter_add(x, i, u, _BLOCK_AXIS1),
                     [(5, 12, 1, 1), _idx(1), (5, 4, 1, 1)], input_generator=_distinct([8]), expected_ops=["ScatterND"]),
            # Histogram-style accumulation with repeated indices through the jnp API.
            Testcase("scatter_add_at_repeated", lambda x, i, v: _at(x)[i].add(v), [(4, 3), _idx("N"), ("N", 3)],
                     input_generator=_ints(-4, 6), expected_ops=["ScatterND"]),
            # Two batching dims (vmap of vmap) plus a row window.
            Testcase("scatter_add_float16", lambda x, i, v: _at(x)[i].add(v),
                     [jax.ShapeDtypeStruct((5,), jnp.float16), _idx(3), jax.ShapeDtypeStruct((3,), jnp.float16)],
                     input_generator=_ints(0, 5), expected_ops=["ScatterND"], run_f64=False, rtol=1e-3, atol=1e-3),
            Testcase("scatter_add_double_vmap",
                     lambda x, i, v: jax.vmap(jax.vmap(lambda r, j, w: _at(r)[j].add(w)))(x, i, v),
                     [(2, "B", 4, 3), _idx(2, "B"), (2, "B", 3)], input_generator=_ints(0, 4),
                     expected_ops=["ScatterND"]),
        ],
    ),
    Component(
        name="lax.scatter_sub",
        onnx=["Neg", "ScatterND"],
        since="v0.7.0",
        testcases=[
            Testcase("scatter_sub_at", lambda x, i, v: _at(x)[i].subtract(v), [(5, 2), _idx("N"), ("N", 2)],
                     input_generator=_ints(0, 6), expected_ops=["ScatterND"]),
        ],
    ),
    Component(
        name="lax.scatter_mul",
        onnx=["ScatterND"],
        since="v0.7.0",
        testcases=[
            Testcase("scatter_mul_at", lambda x, i, v: _at(x)[i].multiply(v), [(5, "B"), _idx(3), (3, "B")],
                     input_generator=_ints(0, 7), expected_ops=["ScatterND"]),
        ],
    ),
    Component(
        name="lax.scatter_min",
        onnx=["ScatterND"],
        since="v0.7.0",
        testcases=[
            Testcase("scatter_min_at", lambda x, i, v: _at(x)[i].min(v), [(5,), _idx("N"), ("N",)],
                     input_generator=_ints(-2, 7), expected_ops=["ScatterND"]),
            Testcase("scatter_min_clip", lambda x, i, v: _at(x)[i].min(v, mode="clip"), [(5, 2), _idx(4), (4, 2)],
                     input_generator=_ints(-2, 9), expected_ops=["ScatterND"]),
        ],
    ),
    Component(
        name="lax.scatter_max",
        onnx=["ScatterND"],
        since="v0.7.0",
        testcases=[
            Testcase("scatter_max_at", lambda x, i, v: _at(x)[:, i].max(v), [("B", 4), _idx(3), ("B", 3)],
                     input_generator=_ints(0, 6), expected_ops=["ScatterND"]),
            Testcase("scatter_max_int32", lambda x, i, v: _at(x)[i].max(v), [_idx(5), _idx("N"), _idx("N")],
                     input_generator=_ints(0, 6), expected_ops=["ScatterND"]),
        ],
    ),
]

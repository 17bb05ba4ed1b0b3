"""Testcases of :mod:`jax2onnx_lax.slicing` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase


def _idx(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.int32)


def _like(value, i):
    """A constant index of the traced index's dtype (lax wants all indices of one type)."""
    return jnp.asarray(value, dtype=i.dtype)


def _dynamic_slice(x, *starts, sizes):
    return lax.dynamic_slice_p.bind(x, *starts, slice_sizes=tuple(sizes))


def _dynamic_update_slice(x, update, *starts):
    return lax.dynamic_update_slice_p.bind(x, update, *starts)


def _some_out_of_range(rng, shape, dtype):
    """Indices from -3 to 9: the lowering must clamp them exactly as XLA does."""
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-3, 10, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


components = [
    Component(
        name="lax.slice",
        onnx=["Slice"],
        since="v0.1.0",
        testcases=[
            Testcase("slice_test1", lambda x: lax.slice(x, (1, 1), (3, 3)), [(4, 4)], expected_ops=["Slice"]),
            Testcase("slice_3d_none_strides", lambda x: lax.slice(x, (0, 1, 0), (2, 3, 4)), [(2, 3, 4)],
                     expected_ops=["Slice"]),
            Testcase("slice_strided", lambda x: lax.slice(x, (0, 1), (x.shape[0], 6), (1, 2)), [("B", 7)],
                     expected_ops=["Slice"]),
            # Limits that are symbolic expressions (B - 1) are computed from the input's shape.
            Testcase("slice_symbolic_limit", lambda x: lax.slice(x, (0, 1), (x.shape[0] - 1, 3)), [("B", 3)],
                     expected_ops=["Slice"], static_sizes={"B": 4}),
        ],
    ),
    Component(
        name="lax.rev",
        onnx=["Slice"],
        since="v0.7.0",
        testcases=[
            Testcase("rev_axis0", lambda x: lax.rev(x, (0,)), [("B", 3)], expected_ops=["Slice"]),
            Testcase("rev_two_axes", lambda x: lax.rev(x, (0, 2)), [(2, "B", 4)], expected_ops=["Slice"]),
        ],
    ),
    Component(
        name="lax.pad",
        onnx=["Pad", "Slice", "Reshape"],
        since="v0.7.0",
        testcases=[
            Testcase("pad_low_high", lambda x: lax.pad(x, jnp.asarray(0, x.dtype), ((1, 2, 0), (0, 1, 0))), [("B", 3)],
                     expected_ops=["Pad"]),
            Testcase("pad_value_operand", lambda x, v: lax.pad(x, v, ((2, 0, 0), (1, 1, 0))), [("B", 3), ()],
                     expected_ops=["Pad"]),
            Testcase("pad_negative_crops", lambda x: lax.pad(x, jnp.asarray(0, x.dtype), ((-1, 2, 0), (1, -2, 0))),
                     [("B", 4)], expected_ops=["Slice", "Pad"], static_sizes={"B": 4}),
            Testcase("pad_interior", lambda x, v: lax.pad(x, v, ((0, 0, 2), (1, 0, 1))), [("B", 3), ()],
                     expected_ops=["Pad", "Reshape"]),
            Testcase("pad_interior_and_negative", lambda x, v: lax.pad(x, v, ((-2, -1, 1),)), [(4,), ()],
                     expected_ops=["Pad", "Slice"]),
            Testcase("pad_int32", lambda x: lax.pad(x, jnp.asarray(7, x.dtype), ((1, 1, 1),)), [_idx("B")],
                     expected_ops=["Pad"]),
        ],
    ),
    Component(
        name="lax.dynamic_slice",
        onnx=["Slice"],
        since="v0.1.0",
        testcases=[
            # The primitive itself (lax.dynamic_slice first wraps negative indices): starts from -3 to 9
            # must be clamped into [0, dim - size].
            Testcase("dynamic_slice_test1", lambda x, i: _dynamic_slice(x, i, sizes=(2,)), [(5,), _idx()],
                     input_generator=_some_out_of_range, expected_ops=["Slice"]),
            Testcase("dynamic_slice_2d", lambda x, i, j: _dynamic_slice(x, i, j, sizes=(2, 2)),
                     [(4, 5), _idx(), _idx()], input_generator=_some_out_of_range, expected_ops=["Slice"]),
            Testcase("dynamic_slice_3d", lambda x, i: _dynamic_slice(x, _like(1, i), i, _like(0, i), sizes=(1, 2, 3)),
                     [(3, 4, 3), _idx()], input_generator=_some_out_of_range, expected_ops=["Slice"]),
            # ViT-style: a batch of token sequences, take a window of tokens from a traced position.
            Testcase("dynamic_slice_vit_like",
                     lambda x, i: _dynamic_slice(x, _like(0, i), i, _like(0, i), sizes=(x.shape[0], 2, 4)),
                     [("B", 5, 4), _idx()], input_generator=_some_out_of_range, expected_ops=["Slice"]),
            # The slice size along the batch axis is itself symbolic (B - 1).
            Testcase("dynamic_slice_vit_like_dynamic",
                     lambda x, i: _dynamic_slice(x, i, _like(1, i), _like(0, i), sizes=(x.shape[0] - 1, 3, 4)),
                     [("B", 5, 4), _idx()], input_generator=_some_out_of_range, expected_ops=["Slice"],
                     run_static=False),
            # The sliced axis is the symbolic one: the clamp bound B - 1 is computed in the graph.
            Testcase("dynamic_slice_symbolic_axis", lambda x, i: _dynamic_slice(x, i, _like(0, i), sizes=(1, 3)),
                     [("B", 3), _idx()], input_generator=_some_out_of_range, expected_ops=["Slice", "Shape"],
                     run_static=False),
            # Through the public API (negative indices wrap first, then clamp).
            Testcase("dynamic_slice_api", lambda x, i: lax.dynamic_slice_in_dim(x, i, 2, axis=1), [("B", 6), _idx()],
                     input_generator=_some_out_of_range, expected_ops=["Slice"]),
        ],
    ),
    Component(
        name="lax.dynamic_update_slice",
        onnx=["Slice", "Concat"],
        since="v0.7.0",
        testcases=[
            Testcase("dus_1d", lambda x, u, i: _dynamic_update_slice(x, u, i), [(6,), (2,), _idx()],
                     input_generator=_some_out_of_range, expected_ops=["Concat"]),
            Testcase("dus_2d_block", lambda x, u, i, j: _dynamic_update_slice(x, u, i, j),
                     [(4, 5), (2, 3), _idx(), _idx()], input_generator=_some_out_of_range, expected_ops=["Concat"]),
            # A row update in a batch of states (the x.at[i].set(row) pattern).
            Testcase("dus_batch_rows", lambda x, u, i: _dynamic_update_slice(x, u, i, _like(0, i)),
                     [("B", 3), (1, 3), _idx()], input_generator=_some_out_of_range, expected_ops=["Concat"]),
            Testcase("dus_symbolic_axis_kept", lambda x, u, i: _dynamic_update_slice(x, u, _like(0, i), i, _like(0, i)),
                     [("B", 5, 2), ("B", 2, 2), _idx()], input_generator=_some_out_of_range, expected_ops=["Concat"]),
            Testcase("dus_full_update", lambda x, u, i: _dynamic_update_slice(x, u, i), [(3,), (3,), _idx()],
                     input_generator=_some_out_of_range),
            Testcase("dus_api", lambda x, u, i: lax.dynamic_update_slice_in_dim(x, u, i, axis=0),
                     [("B", 2), (1, 2), _idx()], input_generator=_some_out_of_range, expected_ops=["Concat"],
                     static_sizes={"B": 4}),
        ],
    ),
]

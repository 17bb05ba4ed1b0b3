"""Testcases of :mod:`jax2onnx_jnp.shape_ops` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.testing import Component, Testcase

from .helpers import grad_of_sum, on_symbolic_expect


def _seed_tile_repeats(t):
    # A numpy array: under tracing (JAX >= 0.7) even a constant jnp.array is a tracer, and
    # jnp.tile needs concrete repeats.
    return jnp.tile(t, np.array([3, 1, 1], dtype=np.int32))


def _concat_tile_and_symbolic(x):
    token = jnp.zeros((1, 1, x.shape[2]), dtype=x.dtype)
    return jnp.concatenate([jnp.broadcast_to(token, (x.shape[0], 1, x.shape[2])), x], axis=1)


def _tile_sym(x):
    return jnp.tile(x, (x.shape[0], 1))


def _tc(name, fn, shapes, ops=(), **kw):
    return Testcase(name, fn, shapes, expected_ops=list(ops), **kw)


_T = ["Tile"]


components = [
    Component(name="jnp.tile", onnx=["Tile"], since="v0.1.0", testcases=[
        _tc("tile_repeats", _seed_tile_repeats, [(1, 1, 8)], _T),
        _tc("tile_a", lambda a: jnp.tile(a, (1, 2)), [(2, 3)], _T),
        _tc("tile_b", lambda a: jnp.tile(a, (1, 2, 1)), [(1, 5, 5)], _T),
        _tc("tile_c", lambda a: jnp.tile(a, (1, 4)), [(3, 3)], _T),
        _tc("tile_d", lambda a: jnp.tile(a, 2), [(3, 3)], _T),
        _tc("tile_dynamic_input_static", lambda a: jnp.tile(a, (2, 1)), [(5, 3)], _T),
        _tc("tile_dynamic_input", lambda a: jnp.tile(a, (2, 1)), [("B", 3)], _T),
        _tc("tile_pad", lambda a: jnp.tile(a, (2, 3, 4)), [(4, 5)], _T),
        _tc("tile_with_symbolic_repeats_static", _tile_sym, [(3, 4)], _T),
        _tc("tile_with_symbolic_repeats", _tile_sym, [("B", 4)], _T),
        _tc("tile_param_symbolic", lambda x, y: jnp.tile(x, (1, y.shape[0])), [(2, 3), ("N", 5)], _T),
        _tc("tile_vmap", jax.vmap(lambda a: jnp.tile(a, (2, 1))), [("B", 2, 3)]),
        _tc("tile_grad", grad_of_sum(lambda a: jnp.tile(a, (1, 3))), [("B", 3)]),
    ]),
    Component(name="jnp.stack", onnx=["Unsqueeze", "Concat"], since="v0.7.0", testcases=[
        _tc("stack", lambda x, y: jnp.stack([x, y]), [("B", 3), ("B", 3)], ["Concat"]),
        _tc("stack_last_axis", lambda x, y, z: jnp.stack((x, y, z), axis=-1), [("B", 3)] * 3, ["Concat"]),
        _tc("stack_vmap", jax.vmap(lambda x, y: jnp.stack([x, y], axis=1)), [("B", 2, 3)] * 2),
        _tc("stack_grad", grad_of_sum(lambda x, y: jnp.stack([x, y], axis=1)), [("B", 3)] * 2),
    ]),
    Component(name="jnp.repeat", onnx=["Gather"], since="v0.7.0", testcases=[
        _tc("repeat_scalar", lambda x: jnp.repeat(x, 2, axis=1), [("B", 3)], ["Gather"]),
        _tc("repeat_per_element", lambda x: jnp.repeat(x, np.array([1, 0, 3]), axis=1), [("B", 3)], ["Gather"]),
        _tc("repeat_flat", lambda x: jnp.repeat(x, 2), [(2, 3)], ["Gather"]),
        _tc("repeat_symbolic_axis", lambda x: jnp.repeat(x, 2, axis=0), [("B", 3)],
            description="repeating along a symbolic axis: broadcast + reshape from lax"),
        _tc("repeat_vmap", jax.vmap(lambda x: jnp.repeat(x, 2, axis=0)), [("B", 3, 2)]),
        _tc("repeat_grad", grad_of_sum(lambda x: jnp.repeat(x, 2, axis=1)), [("B", 3)]),
    ]),
    Component(name="jnp.reshape", onnx=["Reshape"], since="v0.1.0", testcases=[
        _tc("reshape_1", lambda a: jnp.reshape(a, (2, 6)), [(3, 4)], ["Reshape"]),
        _tc("reshape_2", lambda a: jnp.reshape(a, (-1, 2)), [(3, 4)], ["Reshape"]),
        _tc("reshape_3", lambda a: jnp.reshape(a, (2, -1)), [(3, 4)], ["Reshape"]),
        _tc("reshape_4", lambda a: jnp.reshape(a, (a.shape[0], -1)), [("B", 3, 4)], ["Reshape"]),
        _tc("reshape_to_scalar", lambda a: jnp.reshape(a, ()), [(1,)], ["Reshape"]),
        _tc("reshape_from_scalar", lambda a: jnp.reshape(a, (1,)), [()], ["Reshape"]),
        _tc("reshape_cnn", lambda x: x.reshape(x.shape[0], -1), [("B", 4, 2, 2)], ["Reshape"]),
        _tc("reshape_valid_flatten_trailing", lambda x: jnp.reshape(x, (x.shape[0], x.shape[1] * x.shape[2])),
            [("B", 3, 4)], ["Reshape"]),
        _tc("reshape_with_target_shape_from_symbolic_dim_computation",
            lambda x: jnp.reshape(x, (x.shape[0] * x.shape[1] // 2, 2 * x.shape[2])), [("B", 4, 3)], ["Reshape"],
            static_sizes={"B": 2}),
    ]),
    Component(name="jnp.shape", onnx=["Shape"], since="v0.4.0", testcases=[
        _tc("shape_basic", lambda x: jnp.asarray(jnp.shape(x)), [(3, 4)]),
        _tc("shape_dynamic", lambda x: x * jnp.shape(x)[0], [("B", 4)], check=on_symbolic_expect("Shape")),
    ]),
    Component(name="jnp.squeeze", onnx=["Squeeze"], since="v0.1.0", testcases=[
        _tc("squeeze_single_dim", lambda a: jnp.squeeze(a, axis=0), [(1, 4, 3)], ["Squeeze"]),
        _tc("squeeze_multiple_dims", lambda a: jnp.squeeze(a, axis=(0, 2)), [(1, 4, 1, 3)], ["Squeeze"]),
        _tc("squeeze_vit_output", lambda a: jnp.squeeze(a, axis=1), [(1, 1, 10)], ["Squeeze"]),
        _tc("squeeze_dynamic_batch", lambda a: jnp.squeeze(a, axis=1), [("B", 1, 10)], ["Squeeze"]),
        _tc("squeeze_all_dims", lambda a: jnp.squeeze(a), [(1, 1, 1)], ["Squeeze"]),
        _tc("squeeze_negative_axis", lambda a: jnp.squeeze(a, axis=-1), [(1, 4, 1)], ["Squeeze"]),
        _tc("squeeze_negative_axis_tuple", lambda a: jnp.squeeze(a, axis=(-1, -3)), [(1, 4, 1)], ["Squeeze"]),
        _tc("squeeze_dynamic_and_negative_axis", lambda a: jnp.squeeze(a, axis=(-1, -3)), [(1, "B", 1)],
            ["Squeeze"]),
    ]),
    Component(name="jnp.transpose", onnx=["Transpose"], since="v0.1.0", testcases=[
        _tc("transpose_basic", lambda a: jnp.transpose(a, (1, 0)), [(2, 3)], ["Transpose"]),
        _tc("transpose_reverse", lambda a: jnp.transpose(a, (2, 1, 0)), [(2, 3, 4)], ["Transpose"]),
        _tc("transpose_4d", lambda a: jnp.transpose(a, (0, 2, 3, 1)), [("B", 2, 3, 4)], ["Transpose"]),
        _tc("transpose_square_matrix", lambda a: jnp.transpose(a), [(5, 5)], ["Transpose"]),
        _tc("transpose_high_dim", lambda a: jnp.transpose(a, (4, 3, 2, 1, 0)), [(2, 3, 2, 3, 2)], ["Transpose"]),
        _tc("transpose_no_axes", lambda a: jnp.transpose(a), [(2, 3, 4)], ["Transpose"]),
        _tc("transpose_3d", lambda a: jnp.transpose(a, (0, 2, 1)), [("B", 3, 4)], ["Transpose"]),
    ]),
    Component(name="jnp.concatenate", onnx=["Concat"], since="v0.1.0", testcases=[
        _tc("concatenate", lambda a, b: jnp.concatenate((a, b), axis=0), [(3,), (3,)], ["Concat"]),
        _tc("concatenate_abstract_middle_dim", lambda a, b: jnp.concatenate((a, b), axis=1),
            [("B", 1, 8), ("B", 10, 8)], ["Concat"]),
        _tc("concatenate_tile_and_symbolic", _concat_tile_and_symbolic, [("B", 5, 4)], ["Concat"]),
    ]),
    Component(name="jnp.split", onnx=["Split"], since="v0.7.0", testcases=[
        _tc("split_sections", lambda x: jnp.split(x, 3, axis=1), [("B", 6)], ["Split"]),
        _tc("split_indices", lambda x: jnp.split(x, [1, 4], axis=1), [("B", 6)], ["Split"]),
    ]),
    Component(name="jnp.flip", onnx=["Slice"], since="v0.7.0", testcases=[
        _tc("flip", lambda x: jnp.flip(x, axis=1), [("B", 4)]),
        _tc("flip_all", lambda x: jnp.flip(x), [("B", 3, 2)]),
    ]),
]

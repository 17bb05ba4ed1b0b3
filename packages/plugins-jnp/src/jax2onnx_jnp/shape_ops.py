"""Shape functions. ``jnp.tile`` → Tile (repeats may be symbolic), ``jnp.stack`` → Unsqueeze +
Concat, ``jnp.repeat`` with static repeats along a static axis → one Gather with constant indices.

``reshape``, ``squeeze``, ``transpose``, ``concatenate``, ``split``, ``flip`` and ``jnp.shape``
map to single lax primitives (or static slices) already: they are documented and tested here and
lowered by the lax pack (Reshape, Squeeze, Transpose, Concat, Split, Slice, Shape). ``roll`` has
its own module (roll.py).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax2onnx.plugin import Lowerings, is_array, is_symbolic_dim
from jax2onnx.testing import Component, Testcase

from ._common import is_static_int, mark, mark_name, patches_for
from .cases.helpers import grad_of_sum, on_symbolic_expect

lowerings = Lowerings()


# ---------------------------------------------------------------------------------------------
# tile


def _static_reps(reps):
    """``reps`` as a tuple of non-negative ints / symbolic dims; None if it depends on data."""
    if is_static_int(reps) or is_symbolic_dim(reps):
        reps = (reps,)
    elif isinstance(reps, (jax.Array, np.ndarray)):
        try:
            reps = tuple(int(r) for r in np.asarray(reps).reshape(-1))  # concrete (not traced) arrays
        except Exception:  # noqa: BLE001 - a tracer: data-dependent repeats
            return None
    if not isinstance(reps, (tuple, list)):
        return None
    out = []
    for r in reps:
        if is_static_int(r) and r >= 0:
            out.append(int(r))
        elif is_symbolic_dim(r):
            out.append(r)
        else:
            return None
    return tuple(out)


def _tile_region(original, a, *, reps):
    return original(a, reps)


def _make_tile(name, original):
    region = functools.partial(_tile_region, original)

    @functools.wraps(original)
    def tile(A, reps):
        r = _static_reps(reps) if is_array(A) else None
        if r is not None:
            return mark("tile", region, A, reps=r)
        return original(A, reps)

    return tile


@lowerings.register_call(mark_name("tile"))
def lower_tile(ctx, x):
    reps = list(ctx.marked.params["reps"])
    ndim = len(ctx.avals_in[0].shape)
    if len(reps) < ndim:  # numpy: missing repeats are 1 for the leading axes
        reps = [1] * (ndim - len(reps)) + reps
    elif len(reps) > ndim:  # ... and missing axes are new leading axes of size 1
        x = ctx.op.Unsqueeze(x, ctx.i64(range(len(reps) - ndim)))
    return ctx.op.Tile(x, ctx.shape_tensor(reps))


# ---------------------------------------------------------------------------------------------
# stack


def _stack_region(original, *arrays, axis):
    return original(arrays, axis=axis)


def _make_stack(name, original):
    region = functools.partial(_stack_region, original)

    @functools.wraps(original)
    def stack(arrays, axis=0, out=None, dtype=None):
        if (
            isinstance(arrays, (list, tuple))
            and arrays
            and all(is_array(a) for a in arrays)
            and is_static_int(axis)
            and out is None
            and dtype is None
            and -np.ndim(arrays[0]) - 1 <= axis <= np.ndim(arrays[0])
        ):
            return mark("stack", region, *arrays, axis=int(axis) % (np.ndim(arrays[0]) + 1))
        return original(arrays, axis, out, dtype)

    return stack


@lowerings.register_call(mark_name("stack"))
def lower_stack(ctx, *xs):
    axis = ctx.marked.params["axis"]
    dtype = ctx.avals_out[0].dtype
    parts = [ctx.op.Unsqueeze(ctx.cast(x, dtype), ctx.i64([axis])) for x in xs]
    return ctx.op.Concat(*parts, axis=axis)


# ---------------------------------------------------------------------------------------------
# repeat


def _repeat_region(original, a, *, repeats, axis):
    return original(a, np.asarray(repeats) if isinstance(repeats, tuple) else repeats, axis=axis)


def _make_repeat(name, original):
    region = functools.partial(_repeat_region, original)

    @functools.wraps(original)
    def repeat(a, repeats, axis=None, **kwargs):
        r = _static_reps(repeats)
        if (
            is_array(a)
            and np.ndim(a) >= 1
            and r is not None
            and all(is_static_int(v) for v in r)
            and (axis is None or is_static_int(axis))
            and not kwargs
        ):
            ax = None if axis is None else int(axis) % np.ndim(a)
            size = np.prod(np.shape(a)) if ax is None else np.shape(a)[ax]  # symbolic: not an int
            if is_static_int(size) and len(r) in (1, int(size)):
                return mark("repeat", region, a, repeats=r[0] if len(r) == 1 else r, axis=ax)
        return original(a, repeats, axis, **kwargs)

    return repeat


@lowerings.register_call(mark_name("repeat"))
def lower_repeat(ctx, x):
    p = ctx.marked.params
    axis = p["axis"]
    shape = ctx.avals_in[0].shape
    if axis is None:
        x = ctx.op.Reshape(x, ctx.i64([-1]))
        size, axis = int(np.prod(shape)), 0
    else:
        size = int(shape[axis])
    indices = np.repeat(np.arange(size, dtype=np.int64), np.asarray(p["repeats"], dtype=np.int64))
    return ctx.op.Gather(x, ctx.const(indices), axis=axis)


patches = (
    patches_for("jax.numpy", ["tile"], _make_tile)
    + patches_for("jax.numpy", ["stack"], _make_stack)
    + patches_for("jax.numpy", ["repeat"], _make_repeat)
)


# ---------------------------------------------------------------------------------------------
# testcases


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

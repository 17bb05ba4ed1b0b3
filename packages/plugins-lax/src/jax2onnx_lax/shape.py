"""lax shape lowerings: reshape, broadcast_in_dim, squeeze, transpose, concatenate, split, iota,
dim_as_value.

Symbolic dims (``B``, ``4*B``) never become constants: targets that need them are computed in the
graph from ``Shape`` (``ctx.shape_tensor``), constants are used only where they are exact.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.plugin import Lowerings

from . import complex_pairs as cp
from .shape_helpers import is_static, reshape, same_dim, same_shape, transpose

lowerings = Lowerings()


@lowerings.register("reshape")
def lower_reshape(ctx, x, *_dynamic_shape):
    in_shape, out_shape = ctx.avals_in[0].shape, ctx.avals_out[0].shape
    dims = ctx.params.get("dimensions")
    if dims is not None:  # old-style reshape that transposes first
        x = transpose(ctx, x, cp.pair_perm(dims) if cp.is_complex(ctx.avals_in[0]) else dims)
        in_shape = [in_shape[d] for d in dims]
    if cp.is_complex(ctx.avals_in[0]):  # the (real, imag) axis stays last
        in_shape, out_shape = cp.pair_shape(in_shape), cp.pair_shape(out_shape)
    return reshape(ctx, x, in_shape, out_shape)


@lowerings.register("broadcast_in_dim")
def lower_broadcast_in_dim(ctx, x, *_dynamic_shape):
    """Unsqueeze the new axes, then Expand where a size grows.

    Expand broadcasts both ways, so a dim the operand already has can be given as 1 in the target:
    the target is then a constant even when the operand carries symbolic dims.
    """
    in_shape = ctx.avals_in[0].shape
    out_shape = ctx.params["shape"]
    bdims = tuple(ctx.params["broadcast_dimensions"])
    dtype = cp.part_dtype(ctx.avals_out[0])
    if cp.is_complex(ctx.avals_out[0]):  # the (real, imag) axis: one more operand axis, mapped last
        in_shape, bdims = cp.pair_shape(in_shape), (*bdims, len(out_shape))
        out_shape = cp.pair_shape(out_shape)
    n = len(out_shape)
    have = [1] * n
    for k, d in enumerate(bdims):
        have[d] = in_shape[k]
    if any(is_static(d) and int(d) == 0 for d in out_shape):
        # An empty result (jnp.pad builds these): onnxruntime's Expand does not produce a 0-sized
        # dim from a 1, so make the empty tensor directly.
        zero = np.zeros(1, dtype=dtype)
        return ctx.op.ConstantOfShape(ctx.shape_tensor(out_shape), value=zero)
    needs_expand = not same_shape(have, out_shape)
    leading_only = bdims == tuple(range(n - len(in_shape), n))
    if len(in_shape) != n and not (needs_expand and leading_only):
        x = ctx.op.Unsqueeze(x, ctx.i64([i for i in range(n) if i not in bdims]))
    if not needs_expand:
        return x
    target = [1 if same_dim(h, o) else o for h, o in zip(have, out_shape, strict=True)]
    return ctx.op.Expand(x, ctx.shape_tensor(target))


@lowerings.register("squeeze")
def lower_squeeze(ctx, x):
    dims = ctx.params["dimensions"]
    if not dims:
        return x
    return ctx.op.Squeeze(x, ctx.i64(sorted(dims)))


@lowerings.register("transpose")
def lower_transpose(ctx, x):
    perm = ctx.params["permutation"]
    return transpose(ctx, x, cp.pair_perm(perm) if cp.is_complex(ctx.avals_in[0]) else perm)


@lowerings.register("concatenate")
def lower_concatenate(ctx, *xs):
    if len(xs) == 1:
        return xs[0]
    return ctx.op.Concat(*xs, axis=int(ctx.params["dimension"]))


@lowerings.register("split")
def lower_split(ctx, x):
    sizes = list(ctx.params["sizes"])
    if len(sizes) == 1:
        return [x]
    split = ctx.shape_tensor(sizes)
    return list(ctx.op.Split(x, split, axis=int(ctx.params["axis"]), _outputs=len(sizes)))


# Element types the target onnxruntime runs Range on are made directly; others in int64, then cast.


@lowerings.register("iota")
def lower_iota(ctx):
    dtype = np.dtype(ctx.params["dtype"])
    shape = ctx.params["shape"]
    axis = int(ctx.params["dimension"])
    range_dtype = dtype if dtype in ctx.kernel_dtypes("Range") else np.dtype(np.int64)
    limit = ctx.dim_scalar(shape[axis], range_dtype)
    r = ctx.op.Range(ctx.const(0, range_dtype), limit, ctx.const(1, range_dtype))
    if range_dtype != dtype:
        r = ctx.cast(r, dtype)
    if len(shape) == 1:
        return r
    r = ctx.op.Unsqueeze(r, ctx.i64([i for i in range(len(shape)) if i != axis]))
    target = [1 if i == axis else d for i, d in enumerate(shape)]
    if all(is_static(d) and int(d) == 1 for d in target):
        return r
    return ctx.op.Expand(r, ctx.shape_tensor(target))


@lowerings.register("dim_as_value")
def lower_dim_as_value(ctx):
    """A symbolic dim used as a number (``x.shape[0] * 2.0``): read it from the input's Shape."""
    return ctx.dim_scalar(ctx.params["dim"], ctx.avals_out[0].dtype)

"""A test-only plugin pack: just enough lowerings for core's own tests (core lowers nothing itself)."""

from __future__ import annotations

import numpy as np

from jax2onnx import hookimpl
from jax2onnx.plugin import Lowerings

lowerings = Lowerings()

for _prim, _op in {"sin": "Sin", "cos": "Cos", "exp": "Exp", "neg": "Neg", "add": "Add", "add_any": "Add", "sub": "Sub", "mul": "Mul", "max": "Max"}.items():
    lowerings.add(_prim, (lambda op: lambda ctx, *xs: getattr(ctx.op, op)(*xs))(_op))


@lowerings.register("reshape")
def lower_reshape(ctx, x, *dyn):
    return ctx.op.Reshape(x, ctx.shape_tensor(ctx.params["new_sizes"]))


@lowerings.register("broadcast_in_dim")
def lower_broadcast_in_dim(ctx, x, *dyn):
    out = ctx.avals_out[0]
    shape = [1] * len(out.shape)
    for i, d in enumerate(ctx.params["broadcast_dimensions"]):
        shape[d] = ctx.avals_in[0].shape[i]
    return ctx.op.Expand(ctx.op.Reshape(x, ctx.shape_tensor(shape)), ctx.shape_tensor(out.shape))


@lowerings.register("integer_pow")
def lower_integer_pow(ctx, x):
    return ctx.op.Pow(x, ctx.const_like(ctx.params["y"], ctx.avals_in[0]))


@lowerings.register("reduce_sum")
def lower_reduce_sum(ctx, x):
    axes = ctx.const(np.array(ctx.params["axes"], dtype=np.int64))
    return ctx.op.ReduceSum(x, axes, keepdims=0)


@lowerings.register("dot_general")
def lower_dot_general(ctx, a, b):
    (ca, cb), (ba, bb) = ctx.params["dimension_numbers"]
    assert tuple(ca) == (len(ctx.avals_in[0].shape) - 1,) and tuple(cb) == (0,) and not ba, "mini pack: plain matmul only"
    return ctx.op.MatMul(a, b)


@lowerings.register("convert_element_type")
def lower_convert(ctx, x):
    return ctx.cast(x, ctx.params["new_dtype"])


@lowerings.register("stop_gradient", "copy", "copy_p")
def lower_identity(ctx, x):
    return ctx.op.Identity(x)


class MiniPack:
    @hookimpl
    def jax2onnx_lowerings(self):
        return list(lowerings)

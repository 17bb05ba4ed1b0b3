"""Dense layers and embeddings."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from .operands import Operands, matmul_bias, one_output_like, reshape_const, static_ints

# ---------------------------------------------------------------------------------------------
# Dense layers: operands ``x``, ``kernel`` (in features..., out features...), optional ``bias``


def lower_dense(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """``x @ kernel + bias`` over the last axis → Gemm (2-D ``x``) or MatMul (+ Add)."""
    ops = Operands(ctx, ins)
    x_shape = ops.shape("x")
    if "kernel" not in ops or not one_output_like(ctx, (*x_shape[:-1], ops.shape("kernel")[-1])):
        return None
    dtype = ctx.avals_out[0].dtype
    bias = ctx.cast(ops["bias"], dtype) if "bias" in ops else None
    return matmul_bias(ctx, ctx.cast(ops["x"], dtype), ctx.cast(ops["kernel"], dtype), bias, len(x_shape))


def lower_dense_general(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """A contraction of ``x``'s trailing axes (param ``axes``, in order) with a kernel of shape
    (*in, *``out_features``) → Reshapes around one matrix product (Gemm or MatMul + Add)."""
    import math

    ops = Operands(ctx, ins)
    p = ctx.marked.params
    x_shape = ops.shape("x")
    rank = len(x_shape)
    axes, out_f = p["axes"], p["out_features"]
    lead = rank - len(axes)
    # Contracting over the trailing axes, in order, is a plain matrix product after flattening.
    if tuple(axes) != tuple(range(lead, rank)) or not one_output_like(ctx, (*x_shape[:lead], *out_f)):
        return None
    in_f = [x_shape[a] for a in axes]
    if not static_ints(in_f):
        return None
    n_in, n_out = math.prod(in_f), math.prod(out_f)
    dtype = ctx.avals_out[0].dtype
    x = ctx.cast(ops["x"], dtype)
    if len(axes) != 1:
        x = ctx.op.Reshape(x, ctx.i64([0] * lead + [-1]))
    kernel = ctx.cast(ops["kernel"], dtype)
    if ops.shape("kernel") != (n_in, n_out):
        kernel = reshape_const(ctx, kernel, [n_in, n_out])
    bias = None
    if "bias" in ops:
        bias = ctx.cast(ops["bias"], dtype)
        if ops.shape("bias") != (n_out,):
            bias = reshape_const(ctx, bias, [n_out])
    y = matmul_bias(ctx, x, kernel, bias, lead + 1)
    if len(out_f) != 1:
        y = ctx.op.Reshape(y, ctx.i64([0] * lead + list(out_f)))
    return y


def lower_einsum_bias(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """``einsum(equation, x, kernel) + bias`` (params ``equation``, ``bias_shape``: the bias
    reshaped to broadcast, None for no bias) → Einsum (+ Add)."""
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    if len(ctx.avals_out) != 1:
        return None
    dtype = ctx.avals_out[0].dtype
    y = ctx.op.Einsum(ctx.cast(ops["x"], dtype), ctx.cast(ops["kernel"], dtype), equation=p["equation"])
    if "bias" in ops and p["bias_shape"] is not None:
        y = ctx.op.Add(y, reshape_const(ctx, ctx.cast(ops["bias"], dtype), p["bias_shape"]))
    return y


# ---------------------------------------------------------------------------------------------
# Embeddings: operand ``embedding`` (num_embeddings, features) with ``ids`` (lookup) or ``query``
# (``attend``, the tied output projection)


def lower_embedding_lookup(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """``embedding[ids]`` → Gather on axis 0.

    ``jnp.take`` in flax's lookup wraps negative ids like ``Gather`` does. Ids outside
    ``[-num_embeddings, num_embeddings)`` give NaN rows in JAX and an error in onnxruntime; a valid
    model never produces them, so the graph stays one Gather rather than growing a bounds check.
    """
    ops = Operands(ctx, ins)
    if "embedding" not in ops or not one_output_like(ctx, (*ops.shape("ids"), ops.shape("embedding")[-1])):
        return None
    return ctx.op.Gather(ctx.cast(ops["embedding"], ctx.avals_out[0].dtype), ops["ids"], axis=0)


def lower_embedding_attend(ctx: Any, *ins: ir.Value) -> ir.Value | None:
    """``query @ embedding.T`` → MatMul with the transposed table (a constant once folded)."""
    ops = Operands(ctx, ins)
    if "embedding" not in ops or not one_output_like(ctx, (*ops.shape("query")[:-1], ops.shape("embedding")[0])):
        return None
    dtype = ctx.avals_out[0].dtype
    table = ctx.op.Transpose(ctx.cast(ops["embedding"], dtype), perm=[1, 0])
    return ctx.op.MatMul(ctx.cast(ops["query"], dtype), table)



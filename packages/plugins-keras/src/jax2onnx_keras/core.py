"""keras.layers.Dense, EinsumDense → Gemm / MatMul + Add / Einsum, with the layer's activation as
its single ONNX op.

A 2-D input becomes one ``Gemm`` (bias fused); higher ranks become ``MatMul`` + ``Add``, which
broadcast over the leading axes with no Reshape around them. An ``EinsumDense`` whose equation is
a product over the input's last axis is the same ``MatMul``; other equations stay one ``Einsum``.
The activation (``"relu"``, ``"gelu"``, ...) is part of the layer's region and is emitted from
:data:`ACTIVATIONS`; an activation not in the table (a user's function) keeps Keras's own math for
the whole layer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import numpy as np
from jax2onnx.fusion import Operands, const_array, is_array, reshape_const, static_ints
from jax2onnx.plugin import Lowerings

from ._fusion import call_layer, mark_name, one_output_like, patch, plain_float32, quantized_or_lora

lowerings = Lowerings()

DENSE = "dense"
EINSUM_DENSE = "einsum_dense"
EMBEDDING = "embedding"

_SELU_ALPHA = 1.6732632423543772848170429916717
_SELU_SCALE = 1.0507009873554804934193349852946

#: Keras activation (by the name of its function in ``keras.activations``) → (ONNX emission,
#: lowest opset). Each one matches Keras's JAX-backend definition at its default arguments.
ACTIVATIONS: dict[str, tuple[Callable[[Any, Any], Any], int]] = {
    "linear": (lambda ctx, y: y, 1),
    "relu": (lambda ctx, y: ctx.op.Relu(y), 1),
    "sigmoid": (lambda ctx, y: ctx.op.Sigmoid(y), 1),
    "tanh": (lambda ctx, y: ctx.op.Tanh(y), 1),
    "softmax": (lambda ctx, y: ctx.op.Softmax(y, axis=-1), 13),
    "log_softmax": (lambda ctx, y: ctx.op.LogSoftmax(y, axis=-1), 13),
    "gelu": (lambda ctx, y: ctx.op.Gelu(y, approximate="none"), 20),  # Keras's default is the exact erf form
    "elu": (lambda ctx, y: ctx.op.Elu(y, alpha=1.0), 1),
    "selu": (lambda ctx, y: ctx.op.Selu(y, alpha=_SELU_ALPHA, gamma=_SELU_SCALE), 1),
    "softplus": (lambda ctx, y: ctx.op.Softplus(y), 1),
    "softsign": (lambda ctx, y: ctx.op.Softsign(y), 1),
    "silu": (lambda ctx, y: ctx.op.Mul(y, ctx.op.Sigmoid(y)), 1),
    "relu6": (lambda ctx, y: ctx.op.Clip(y, ctx.const(np.float32(0)), ctx.const(np.float32(6))), 11),
    "leaky_relu": (lambda ctx, y: ctx.op.LeakyRelu(y, alpha=0.2), 1),  # Keras's default slope
    # jax.nn.hard_sigmoid(x) = relu6(x + 3) / 6 = clip(x / 6 + 1 / 2, 0, 1)
    "hard_sigmoid": (lambda ctx, y: ctx.op.HardSigmoid(y, alpha=1.0 / 6.0, beta=0.5), 1),
    "hard_silu": (lambda ctx, y: ctx.op.HardSwish(y), 1),  # HardSwish is 14; core writes x·HardSigmoid(x) before
    "exponential": (lambda ctx, y: ctx.op.Exp(y), 1),
}


def activation_name(fn: Any) -> str | None:
    """The :data:`ACTIVATIONS` key of a Keras activation function, or None (unknown or custom)."""
    if fn is None:
        return "linear"
    import keras

    name = getattr(fn, "__name__", None)
    if name in ACTIVATIONS and getattr(keras.activations, name, None) is fn:
        return name
    return None


def apply_activation(ctx: Any, y: Any, name: str) -> Any | None:
    emit, min_opset = ACTIVATIONS[name]
    if ctx.opset < min_opset:
        return None
    return emit(ctx, y)


# ---------------------------------------------------------------------------------------------
# Patches


def _patch_dense(original):
    def call(self, inputs, *args, **kwargs):
        act = activation_name(self.activation)
        if (
            not is_array(inputs)
            or inputs.ndim < 2
            or act is None
            or quantized_or_lora(self)
            or not plain_float32(self, inputs)
        ):
            return original(self, inputs, *args, **kwargs)
        return call_layer(DENSE, self, lambda layer, x: original(layer, x, *args, **kwargs), {"x": inputs},
                          activation=act)

    return call


def _patch_einsum_dense(original):
    def call(self, inputs, *args, **kwargs):
        act = activation_name(self.activation)
        if not is_array(inputs) or act is None or quantized_or_lora(self) or not plain_float32(self, inputs):
            return original(self, inputs, *args, **kwargs)
        return call_layer(EINSUM_DENSE, self, lambda layer, x: original(layer, x, *args, **kwargs), {"x": inputs},
                          activation=act, equation=str(self.equation).replace(" ", ""))

    return call


def _patch_embedding(original):
    def call(self, inputs, *args, **kwargs):
        if (
            args
            or kwargs
            or not is_array(inputs)
            or np.dtype(inputs.dtype) not in (np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.float32))
            or quantized_or_lora(self)
            or self.compute_dtype != "float32"
            or self.variable_dtype != "float32"
        ):
            return original(self, inputs, *args, **kwargs)
        return call_layer(EMBEDDING, self, lambda layer, ids: original(layer, ids), {"ids": inputs})

    return call


patches = [
    patch("keras.src.layers.core.dense", "Dense", _patch_dense),
    patch("keras.src.layers.core.embedding", "Embedding", _patch_embedding),
    patch("keras.src.layers.core.einsum_dense", "EinsumDense", _patch_einsum_dense),
]


# ---------------------------------------------------------------------------------------------
# Lowerings


def matmul_bias(ctx: Any, x: Any, kernel: Any, bias: Any | None, x_rank: int) -> Any:
    """``x @ kernel + bias``: Gemm for a 2-D ``x``, else MatMul (+ Add)."""
    if x_rank == 2:
        return ctx.op.Gemm(x, kernel, bias) if bias is not None else ctx.op.Gemm(x, kernel)
    y = ctx.op.MatMul(x, kernel)
    return y if bias is None else ctx.op.Add(y, bias)


@lowerings.register_call(mark_name(DENSE))
def lower_dense(ctx, *ins):
    ops = Operands(ctx, ins)
    x_shape = ops.shape("x")
    if "kernel" not in ops or len(ops.shape("kernel")) != 2:
        return None
    if not one_output_like(ctx, (*x_shape[:-1], ops.shape("kernel")[-1])):
        return None
    y = matmul_bias(ctx, ops["x"], ops["kernel"], ops.get("bias"), len(x_shape))
    return apply_activation(ctx, y, ctx.marked.params["activation"])


@lowerings.register_call(mark_name(EMBEDDING))
def lower_embedding(ctx, *ins):
    """One Gather. Keras's ``ops.take`` fills rows of out-of-range ids with NaN; onnxruntime's
    Gather rejects such an id instead (in-range ids, negative ones included, agree). Float ids (a
    model whose Input is float32) are cast to integers as Keras casts them, truncating."""
    ops = Operands(ctx, ins)
    if "embeddings" not in ops or not one_output_like(ctx, (*ops.shape("ids"), ops.shape("embeddings")[-1])):
        return None
    ids = ops["ids"]
    if ctx.avals_in[0].dtype == np.float32:
        ids = ctx.cast(ids, np.int64)
    return ctx.op.Gather(ops["embeddings"], ids, axis=0)


def _matmul_equation(equation: str) -> tuple[int, int, int] | None:
    """(batch axes, contracted axes, output axes) when ``equation`` is ``<b><c>,<c><o>-><b><o>``:
    the input's trailing axes contracted with the kernel's leading ones, in order: a matrix product
    once both sides are flattened."""
    m = re.fullmatch(r"([a-z]+),([a-z]+)->([a-z]+)", equation)
    if m is None:
        return None
    x, k, out = m.groups()
    if len(set(x)) != len(x) or len(set(k)) != len(k):
        return None
    shared = [c for c in x if c in k]
    n_c = len(shared)
    if n_c == 0 or x[len(x) - n_c :] != "".join(shared) or k[:n_c] != "".join(shared):
        return None
    batch, kept = x[: len(x) - n_c], k[n_c:]
    if out != batch + kept or not kept:
        return None
    return len(batch), n_c, len(kept)


@lowerings.register_call(mark_name(EINSUM_DENSE))
def lower_einsum_dense(ctx, *ins):
    ops = Operands(ctx, ins)
    p = ctx.marked.params
    if len(ctx.avals_out) != 1 or not one_output_like(ctx, ctx.avals_out[0].shape) or "kernel" not in ops:
        return None
    x, kernel = ops["x"], ops["kernel"]
    k_shape = ops.shape("kernel")
    out_shape = tuple(ctx.avals_out[0].shape)
    bias = ops.get("bias")
    matmul = _matmul_equation(p["equation"])
    if matmul is not None and static_ints(k_shape):
        # x (..., c1, c2) @ kernel (c1, c2, o1, o2): one MatMul over flattened sides; a Reshape whose
        # leading 0s copy the (possibly symbolic) batch dims flattens x and restores the output axes.
        n_b, n_c, n_o = matmul
        n_in, n_out = int(np.prod(k_shape[:n_c])), int(np.prod(k_shape[n_c:]))
        k = kernel if len(k_shape) == 2 else reshape_const(ctx, kernel, [n_in, n_out])
        if n_c > 1:
            x = ctx.op.Reshape(x, ctx.i64([0] * n_b + [-1]))
        b = None
        if bias is not None:
            b_shape = ops.shape("bias")
            if len(b_shape) > n_o or tuple(b_shape) != tuple(out_shape[len(out_shape) - len(b_shape):]):
                return None
            # The bias covers trailing output axes; broadcast it over the rest of the kernel's.
            full = (*([1] * (n_o - len(b_shape))), *b_shape)
            b_arr = const_array(bias, lazy=False)
            if b_arr is not None:
                b = ctx.const(np.broadcast_to(b_arr.reshape(full), tuple(k_shape[n_c:])).reshape(n_out))
            else:
                b = ctx.op.Reshape(ctx.op.Expand(ctx.op.Reshape(bias, ctx.i64(list(full))), ctx.i64(list(k_shape[n_c:]))),
                                   ctx.i64([n_out]))
        y = matmul_bias(ctx, x, k, b, n_b + 1)
        if n_o > 1:
            y = ctx.op.Reshape(y, ctx.i64([0] * n_b + list(k_shape[n_c:])))
    else:
        y = ctx.op.Einsum(x, kernel, equation=p["equation"])
        if bias is not None:
            y = ctx.op.Add(y, bias)
    return apply_activation(ctx, y, p["activation"])

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
from typing import Any

import numpy as np
from jax2onnx.fusion import Operands, const_array, is_array, matmul_bias, reshape_const, static_ints
from jax2onnx.plugin import Lowerings
from jax2onnx_jnp.activations import ACTIVATIONS as JNP_ACTIVATIONS
from jax2onnx_jnp.activations import Activation

from ._fusion import call_layer, mark_name, one_output_like, patch, plain_float32, quantized_or_lora

lowerings = Lowerings()

DENSE = "dense"
EINSUM_DENSE = "einsum_dense"
EMBEDDING = "embedding"

#: Keras activations jax.nn has no fused function for (the rest are jax.nn's, see below).
_KERAS_ONLY: dict[str, Activation] = {
    "linear": Activation(lambda ctx, y, dt: y, "Identity"),
    "tanh": Activation(lambda ctx, y, dt: ctx.op.Tanh(y), "Tanh"),
    "softmax": Activation(lambda ctx, y, dt: ctx.op.Softmax(y, axis=-1), "Softmax"),
    "log_softmax": Activation(lambda ctx, y, dt: ctx.op.LogSoftmax(y, axis=-1), "LogSoftmax"),
    "softsign": Activation(lambda ctx, y, dt: ctx.op.Softsign(y), "Softsign"),
    "exponential": Activation(lambda ctx, y, dt: ctx.op.Exp(y), "Exp"),
}

#: Keras activation (by the name of its function in ``keras.activations``) → (the activation's
#: emission, Keras's defaults where they differ from jax.nn's). jax.nn's functions come from the jnp pack's one table
#: (:data:`jax2onnx_jnp.activations.ACTIVATIONS`); each matches Keras's JAX-backend definition at
#: its default arguments.
ACTIVATIONS: dict[str, tuple[Activation, dict[str, Any]]] = {
    **{name: (act, {}) for name, act in _KERAS_ONLY.items()},
    **{name: (JNP_ACTIVATIONS[name], {}) for name in (
        "relu", "sigmoid", "elu", "selu", "softplus", "silu", "relu6", "hard_sigmoid", "hard_silu")},
    "gelu": (JNP_ACTIVATIONS["gelu"], {"approximate": False}),  # Keras's default is the exact erf form
    "leaky_relu": (JNP_ACTIVATIONS["leaky_relu"], {"negative_slope": 0.2}),  # Keras's default slope
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
    act, keras_defaults = ACTIVATIONS[name]
    if np.dtype(np.float32) not in ctx.kernel_dtypes(act.op):  # the op is newer than the export's opset
        return None
    return act.emit(ctx, y, np.float32, **{**dict(act.params), **keras_defaults})  # the fused layers are float32 (plain_float32)


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

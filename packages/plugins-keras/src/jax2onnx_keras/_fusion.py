"""Shared machinery of the pack: run a Keras layer's own ``call`` as a marked region, and read that
region's operands back in a lowering.

Why the layer's own ``call`` is the region's body: the body is what JAX differentiates and
batches, and what core lowers when the fused op does not apply (under ``vmap``, for a
configuration the lowering declines, in ``grad``'s backward pass). Running Keras's own code keeps
the body exactly Keras's math in every Keras version, instead of a replica that could drift.

The layer's variables (``kernel``, ``bias``, ``moving_mean``, ...) are the region's operands after
the call's inputs: the body reads them through a ``keras.StatelessScope`` that maps each variable
to its operand, Keras's own way to evaluate a layer with given weights. Their names, relative to
the layer (``"kernel"``, ``"query/kernel"``), are recorded as the static param ``operands`` so a
lowering finds each by name. Concrete weights are constants of the traced jaxpr, so they become
initializers of the ONNX graph.

Nothing here imports Keras at import time: the pack is loaded for every export, and only a user
who already imported Keras can be exporting a Keras layer (see :class:`KerasPatch`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx_ir as ir
from jax2onnx.plugin import Patch, marked_call

MARK_PREFIX = "jax2onnx_keras."


class KerasPatch(Patch):
    """A patch of a Keras class, applied only when Keras is already imported with the JAX backend.

    An export must not import Keras (seconds, and with another backend it may not even import):
    a program that never imported it cannot be calling a Keras layer.
    """

    def resolve(self) -> Any | None:
        keras = sys.modules.get("keras")
        if keras is None or sys.modules.get(str(self.target).rsplit(".", 1)[0]) is None:
            return None
        try:
            if keras.backend.backend() != "jax":
                return None
        except Exception:  # noqa: BLE001 - a half-imported keras: nothing of it is being traced
            return None
        return super().resolve()


def patch(module: str, cls: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> KerasPatch:
    """Replace ``<module>.<cls>.call`` with ``make(original)`` during exports."""
    return KerasPatch(f"{module}.{cls}", "call", make)


def relative_name(path: str, prefix: str) -> str:
    """A variable's name inside its layer (``"lstm_cell/kernel"``); a variable Keras keeps outside
    the layer's path (a seed generator's state) keeps its full, unique path."""
    return path[len(prefix) + 1 :] if prefix and path.startswith(prefix + "/") else path


def call_layer(
    mark: str,
    layer: Any,
    body: Callable[..., Any],
    inputs: Mapping[str, Any],
    **static: Any,
) -> Any:
    """Evaluate ``body(layer, *inputs.values())`` as the marked region ``jax2onnx_keras.<mark>``.

    ``inputs`` are the call's array arguments (name -> array); the layer's variables follow them
    as operands. ``static`` (hashable Python values) reaches the lowering as ``ctx.marked.params``
    together with ``operands``: the names of all operands.
    """
    import keras

    variables = list(layer.variables)
    names = tuple(inputs) + tuple(relative_name(v.path, layer.path) for v in variables)
    if len(set(names)) != len(names):  # two variables with one name: no lowering could tell them apart
        return body(layer, *inputs.values())
    n_in = len(inputs)

    def region(*arrays: Any, **_: Any) -> Any:  # the static params come back as keywords
        with keras.StatelessScope(state_mapping=list(zip(variables, arrays[n_in:]))):
            return body(layer, *arrays[:n_in])

    return marked_call(MARK_PREFIX + mark, region, *inputs.values(), *[v.value for v in variables],
                       operands=names, **static)


def mark_name(mark: str) -> str:
    return MARK_PREFIX + mark


def is_array(x: Any) -> bool:
    """A JAX/numpy array or a tracer (anything that becomes an operand), not a Python scalar."""
    import jax

    return isinstance(x, (jax.Array, np.ndarray)) or hasattr(x, "aval")


def plain_float32(layer: Any, x: Any) -> bool:
    """The layer computes in float32 on a float32 input (Keras's ``"float32"`` dtype policy).

    Mixed-precision policies cast inside ``call``; those configurations keep Keras's own math.
    """
    try:
        return (
            np.dtype(x.dtype) == np.float32
            and layer.compute_dtype == "float32"
            and layer.variable_dtype == "float32"
        )
    except (AttributeError, TypeError):
        return False


def quantized_or_lora(layer: Any) -> bool:
    return bool(getattr(layer, "quantization_mode", None)) or bool(getattr(layer, "lora_enabled", False))


# ---------------------------------------------------------------------------------------------
# Lowering side


class Operands:
    """The region's operands by name: ``ops["kernel"]`` (an ``ir.Value``) and ``ops.shape("kernel")``."""

    def __init__(self, ctx: Any, ins: Sequence[ir.Value]):
        names = ctx.marked.params["operands"]
        self._values = dict(zip(names, ins, strict=True))
        self._avals = dict(zip(names, ctx.avals_in, strict=True))

    def __getitem__(self, name: str) -> ir.Value:
        return self._values[name]

    def get(self, name: str) -> ir.Value | None:
        return self._values.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._values

    def shape(self, name: str) -> tuple[Any, ...]:
        return tuple(self._avals[name].shape)


def one_output_like(ctx: Any, shape: Sequence[Any]) -> bool:
    """The equation is the forward call itself: one float32 output of the expected shape.

    Under ``grad`` JAX splits the region into a forward part with the same name and inputs but
    extra (residual) outputs; that one must be lowered as its body, not fused.
    """
    outs = ctx.avals_out
    return (
        len(outs) == 1
        and np.dtype(outs[0].dtype) == np.float32
        and [str(d) for d in outs[0].shape] == [str(d) for d in shape]
    )


def weight_array(v: ir.Value | None) -> np.ndarray | None:
    """The numpy value of a weight held as an initializer (Keras's variables are), else None."""
    if v is None or v.const_value is None or isinstance(v.const_value, ir.LazyTensor):
        return None
    return v.const_value.numpy()


def reshape_const(ctx: Any, v: ir.Value, shape: Sequence[int]) -> ir.Value:
    """A weight reshaped to a static ``shape``: a new initializer when the weight is one (the
    folding pass leaves large results of nodes with shared inputs, such as a pooled shape
    constant, unfolded), else a Reshape."""
    arr = weight_array(v)
    if arr is not None:
        return ctx.const(arr.reshape(list(shape)))
    return ctx.op.Reshape(v, ctx.i64(list(shape)))


def concat_weights(ctx: Any, values: Sequence[ir.Value], axis: int) -> ir.Value:
    """Weights joined along ``axis``: one initializer when all are initializers, else a Concat."""
    arrays = [weight_array(v) for v in values]
    if all(a is not None for a in arrays):
        return ctx.const(np.concatenate(arrays, axis=axis))
    return ctx.op.Concat(*values, axis=axis)


def static_ints(values: Sequence[Any]) -> bool:
    return all(isinstance(d, (int, np.integer)) for d in values)


def to_nchw(ctx: Any, x: ir.Value, rank: int) -> ir.Value:
    """Channels-last (N, *spatial, C) to ONNX's channels-first (N, C, *spatial)."""
    return ctx.op.Transpose(x, perm=[0, rank - 1, *range(1, rank - 1)])


def to_nhwc(ctx: Any, y: ir.Value, rank: int) -> ir.Value:
    """Back from (N, C, *spatial) to (N, *spatial, C)."""
    return ctx.op.Transpose(y, perm=[0, *range(2, rank), 1])

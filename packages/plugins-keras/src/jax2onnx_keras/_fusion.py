"""The Keras part of the pack's fusions: run a Keras layer's own ``call`` as a marked region
(everything library-independent, such as reading the operands back, is core's fusion kit,
``jax2onnx.fusion``).

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

import dataclasses
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from jax2onnx import fusion
from jax2onnx.plugin import ModulePatch

MARK_PREFIX = "jax2onnx_keras."


@dataclasses.dataclass(frozen=True)
class KerasPatch(ModulePatch):
    """An override of a Keras layer class's ``call`` for the exported model's own layer instances
    (:class:`jax2onnx.plugin.ModulePatch`; Keras's classes stay as they are), applied only when
    Keras is already imported with the JAX backend.

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
    """Override ``call`` of the exported model's ``<module>.<cls>`` layers with ``make(original)``."""
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
    named = [(relative_name(v.path, layer.path), v) for v in variables]
    names = tuple(inputs) + tuple(name for name, _ in named)
    if len(set(names)) != len(names):  # two variables with one name: no lowering could tell them apart
        return body(layer, *inputs.values())

    def run(leaves: list[Any], *xs: Any) -> Any:
        with keras.StatelessScope(state_mapping=list(zip(variables, leaves))):
            return body(layer, *xs)

    return fusion.call_region(MARK_PREFIX + mark, run, inputs, [(name, v.value) for name, v in named], **static)


def mark_name(mark: str) -> str:
    return MARK_PREFIX + mark


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
# Lowering side (the rest is core's fusion kit, ``jax2onnx.fusion``)


def one_output_like(ctx: Any, shape: Sequence[Any]) -> bool:
    """The equation is the forward call itself: one float32 output of the expected shape (the
    layers fuse under Keras's float32 policy only; see :func:`plain_float32`)."""
    return fusion.one_output_like(ctx, shape, np.float32)


def spatial_operands(ctx: Any, ins: Sequence[Any], *weights: str) -> tuple[fusion.Operands, Mapping[str, Any], tuple[Any, ...], int] | None:
    """A conv/pool region's ``(operands, params, x's shape, x's rank)``, or None (decline) when one
    of ``weights`` is absent or the call is not the layer's own forward one."""
    ops = fusion.Operands(ctx, ins)
    if any(name not in ops for name in weights) or not one_output_like(ctx, ctx.avals_out[0].shape):
        return None
    shape = ops.shape("x")
    return ops, ctx.marked.params, shape, len(shape)


def channels_and_spatial(params: Mapping[str, Any], shape: Sequence[Any]) -> tuple[Any, tuple[Any, ...]]:
    """A conv/pool layer input's channel count and spatial dims, by the region's ``channels_last``."""
    if params["channels_last"]:
        return shape[-1], tuple(shape[1:-1])
    return shape[1], tuple(shape[2:])

"""Shared machinery of the pack: run an NNX module's own ``__call__`` as a marked region, and read
that region's operands back in a lowering.

Why the module's own code is the region's body: the body is what JAX differentiates and batches,
and what core lowers when the fused op does not apply (under ``vmap``, for a configuration the
lowering declines, for the backward pass of ``grad``). Running flax's own ``__call__`` on a copy
of the module rebuilt from the operands (``nnx.merge``) keeps that body exactly flax's math in
every flax version, instead of a hand-written replica that could drift.

The module's parameters and batch statistics are the region's operands after the call's inputs;
their names (``"kernel"``, ``"query/bias"``, ...) are recorded as the static param ``operands`` so
a lowering finds each by name. Concrete weights are constants of the traced jaxpr, so they become
initializers of the ONNX graph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
import onnx_ir as ir
from flax import nnx
from jax2onnx.plugin import marked_call

#: A patch installs ``make(original)`` as the new ``__call__``; the pack keeps the originals to
#: compare against (e.g. ``MultiHeadAttention.attention_fn`` must be flax's own function).
Replacement = Callable[[Callable[..., Any]], Callable[..., Any]]


def _key_name(k: Any) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def _path_name(path: Sequence[Any]) -> str:
    parts = [_key_name(k) for k in path]
    # State leaves sit under the Variable's own "value" (or "raw_value") entry in some versions.
    while parts and parts[-1] in ("value", "raw_value"):
        parts.pop()
    return "/".join(parts)


def call_module(
    mark: str,
    module: Any,
    body: Callable[..., Any],
    inputs: Mapping[str, Any],
    **static: Any,
) -> Any:
    """Evaluate ``body(module_copy, *inputs.values())`` as the marked region ``mark``.

    ``inputs`` are the call's array arguments (name -> array); the module's ``nnx.Param`` and
    ``nnx.BatchStat`` leaves follow them as operands. ``static`` (hashable Python values) reaches
    the lowering as ``ctx.marked.params`` together with ``operands``: the names of all operands.
    """
    graphdef, weights, rest = nnx.split(module, (nnx.Param, nnx.BatchStat), ...)
    flat, treedef = jax.tree_util.tree_flatten_with_path(weights)
    names = tuple(inputs) + tuple(_path_name(p) for p, _ in flat)
    n_in = len(inputs)

    def region(*arrays: Any, **_: Any) -> Any:
        leaves = jax.tree_util.tree_unflatten(treedef, list(arrays[n_in:]))
        copy = nnx.merge(graphdef, leaves, rest)
        return body(copy, *arrays[:n_in])

    return marked_call(mark, region, *inputs.values(), *[v for _, v in flat], operands=names, **static)


def static_bool(x: Any) -> bool | None:
    """``x`` as a Python bool when it is static (Python/numpy bool), else None (a traced flag)."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    return None


# ---------------------------------------------------------------------------------------------
# Lowering side


class Operands:
    """The region's operands by name: ``ops["kernel"]`` (an ``ir.Value``) and ``ops.aval("kernel")``."""

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

    def aval(self, name: str) -> Any:
        return self._avals[name]

    def shape(self, name: str) -> tuple[Any, ...]:
        return tuple(self._avals[name].shape)


def one_output_like(ctx: Any, shape: Sequence[Any]) -> bool:
    """The equation is the forward call itself: one output of the expected shape.

    Under ``grad`` JAX splits the region into a forward part with the same name and inputs but
    extra (residual) outputs; that one must be lowered as its body, not fused.
    """
    outs = ctx.avals_out
    return len(outs) == 1 and [str(d) for d in outs[0].shape] == [str(d) for d in shape]


def const_array(v: ir.Value | None) -> np.ndarray | None:
    """The numpy value of an initializer, else None."""
    if v is None or v.const_value is None:
        return None
    return v.const_value.numpy()


def static_ints(values: Sequence[Any]) -> bool:
    return all(isinstance(d, (int, np.integer)) for d in values)


def to_nchw(ctx: Any, x: ir.Value, rank: int) -> ir.Value:
    """Channels-last (N, *spatial, C) to ONNX's channels-first (N, C, *spatial)."""
    return ctx.op.Transpose(x, perm=[0, rank - 1, *range(1, rank - 1)])


def to_nhwc(ctx: Any, y: ir.Value, rank: int) -> ir.Value:
    """Back from (N, C, *spatial) to (N, *spatial, C)."""
    return ctx.op.Transpose(y, perm=[0, *range(2, rank), 1])


def find_eqns(closed: Any, name: str) -> list[Any]:
    """Equations named ``name`` in ``closed`` and its nested jaxprs (the region's body)."""
    from jax2onnx import compat

    found = []
    stack = [closed]
    while stack:
        j = stack.pop()
        jaxpr = j.jaxpr if hasattr(j, "jaxpr") else j
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == name:
                found.append(eqn)
            stack.extend(compat.sub_jaxprs(eqn))
    return found


def region_body(ctx: Any) -> Any:
    from jax2onnx import compat

    return compat.call_body(ctx.eqn)

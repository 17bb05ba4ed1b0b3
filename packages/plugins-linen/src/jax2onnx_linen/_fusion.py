"""Shared machinery of the pack: run a Linen module's own ``__call__`` as a marked region, and read
that region's operands back in a lowering.

Why the module's own code is the region's body: the body is what JAX differentiates and batches,
and what core lowers when the fused op does not apply (under ``vmap``/``nn.vmap``, for a
configuration the lowering declines, for the backward pass of ``grad``). The body applies flax's
own (unpatched) ``__call__`` to an unbound clone of the module with ``nn.apply``, on the variables
passed in as operands, so it is exactly flax's math in every flax version.

The module's variables (``params``, ``batch_stats``, ...) are the region's operands after the
call's inputs; their paths without the collection (``"kernel"``, ``"query/bias"``, ``"mean"``) are
recorded as the static param ``operands`` so a lowering finds each by name. Variables bound with
``functools.partial(model.apply, variables)`` are concrete, so they become initializers of the
ONNX graph; inside ``nn.scan`` they are the scanned slices.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
import onnx_ir as ir
from flax import linen as nn
from jax2onnx.plugin import is_array, marked_call

__all__ = ["Operands", "call_module", "fusable", "is_array"]


def _key_name(k: Any) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def fusable(module: nn.Module, *, reads: Sequence[str] = ("params",)) -> bool:
    """The module is bound in apply mode and none of the collections it reads is being updated.

    A module being initialised has no variables yet, and a region cannot write variables back
    (``batch_stats`` in training mode, ``cache`` of a decoder): flax's own code handles both.
    """
    scope = getattr(module, "scope", None)
    if scope is None:
        return False
    try:
        if module.is_initializing():
            return False
        return not any(module.is_mutable_collection(c) for c in reads)
    except Exception:  # noqa: BLE001 - an unusual binding: flax's own code handles it
        return False


def call_module(
    mark: str,
    module: nn.Module,
    body: Callable[..., Any],
    inputs: Mapping[str, Any],
    *,
    collections: Sequence[str] = ("params",),
    **static: Any,
) -> Any:
    """Evaluate ``body(unbound_clone_bound_to_operands, *inputs.values())`` as the region ``mark``.

    ``inputs`` are the call's array arguments (name -> array); the module's variables in
    ``collections`` follow them as operands. ``static`` (hashable Python values) reaches the
    lowering as ``ctx.marked.params`` together with ``operands``: the names of all operands.
    """
    all_vars = module.variables
    variables = {c: all_vars[c] for c in collections if c in all_vars}
    flat, treedef = jax.tree_util.tree_flatten_with_path(variables)
    # Drop the collection name: "params/kernel" -> "kernel" (collections never share a leaf name
    # in the modules this pack fuses).
    names = tuple(inputs) + tuple("/".join(_key_name(k) for k in path[1:]) for path, _ in flat)
    n_in = len(inputs)
    unbound = module.clone(parent=None)

    def region(*arrays: Any, **_: Any) -> Any:
        bound_vars = jax.tree_util.tree_unflatten(treedef, list(arrays[n_in:]))
        return nn.apply(body, unbound)(bound_vars, *arrays[:n_in])

    return marked_call(mark, region, *inputs.values(), *[v for _, v in flat], operands=names, **static)


def static_bool(x: Any) -> bool | None:
    """``x`` as a Python bool when it is static (Python/numpy bool), else None (a traced flag)."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    return None


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
    """The equation is the forward call itself: one output of the expected shape (under ``grad``
    the forward part of the region gains residual outputs and must be lowered as its body)."""
    outs = ctx.avals_out
    return len(outs) == 1 and [str(d) for d in outs[0].shape] == [str(d) for d in shape]


def reshape_const(ctx: Any, v: ir.Value, shape: Sequence[int]) -> ir.Value:
    """Reshape a weight to a static ``shape`` (folded into the initializer by constant folding)."""
    return ctx.op.Reshape(v, ctx.i64(list(shape)))


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

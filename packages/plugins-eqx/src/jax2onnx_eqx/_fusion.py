"""Shared machinery of the pack: run an Equinox module's own ``__call__`` as a marked region, and
read that region's operands back in a lowering.

Why the module's own code is the region's body: the body is what JAX differentiates and batches,
and what core lowers when the fused op does not apply (under ``jax.vmap``/``eqx.filter_vmap``, for
a configuration the lowering declines, for ``grad``'s forward/backward parts). The module is split
into its arrays and its static rest (``eqx.partition``); the body recombines the arrays it
receives as operands with that rest (``eqx.combine``) and calls equinox's own, unpatched
``__call__`` on the result, so it is exactly equinox's math in every equinox version.

The module's arrays follow the call's inputs as operands; their attribute paths
(``"weight"``, ``"query_proj/weight"``) are recorded as the static param ``operands`` so a
lowering finds each by name. Concrete weights are constants of the traced function, so they
become initializers of the ONNX graph.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import onnx_ir as ir
from jax2onnx.plugin import is_array, marked_call

__all__ = ["Operands", "call_module", "is_array", "no_extras", "one_output_like"]


def _key_name(k: Any) -> str:
    for attr in ("name", "key", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def no_extras(args: tuple, kwargs: dict) -> bool:
    """A plain forward call: no extra positional argument (a ``State``), only ``key=None``-like
    keywords (a PRNG key is unused by the modules fused here)."""
    return not args and all(k == "key" for k in kwargs)


def call_module(mark: str, module: Any, body: Callable[..., Any], inputs: Mapping[str, Any], **static: Any) -> Any:
    """Evaluate ``body(module_rebuilt_from_operands, *inputs.values())`` as the region ``mark``.

    ``static`` (hashable Python values) reaches the lowering as ``ctx.marked.params`` together
    with ``operands``: the names of all operands.
    """
    arrays, rest = eqx.partition(module, eqx.is_array)
    flat, treedef = jax.tree_util.tree_flatten_with_path(arrays)
    names = tuple(inputs) + tuple("/".join(_key_name(k) for k in path) for path, _ in flat)
    n_in = len(inputs)

    def region(*xs: Any, **_: Any) -> Any:
        rebuilt = eqx.combine(jax.tree_util.tree_unflatten(treedef, list(xs[n_in:])), rest)
        return body(rebuilt, *xs[:n_in])

    return marked_call(mark, region, *inputs.values(), *[v for _, v in flat], operands=names, **static)


# ---------------------------------------------------------------------------------------------
# Lowering side


class Operands:
    """The region's operands by name: ``ops["weight"]`` (an ``ir.Value``) and ``ops.shape("weight")``."""

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

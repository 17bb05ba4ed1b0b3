"""The NNX part of the pack's fusions: run an NNX module's own ``__call__`` as a marked region.

Why the module's own code is the region's body: the body is what JAX differentiates and batches,
and what core lowers when the fused op does not apply (under ``vmap``, for a configuration the
lowering declines, for the backward pass of ``grad``). Running flax's own ``__call__`` on a copy
of the module rebuilt from the operands (``nnx.merge``) keeps that body exactly flax's math in
every flax version, instead of a hand-written replica that could drift.

The module's parameters and batch statistics are the region's operands after the call's inputs;
their names (``"kernel"``, ``"query/bias"``, ...) are recorded as the static param ``operands`` so
a lowering finds each by name (``jax2onnx.fusion.Operands``). Concrete weights are constants of
the traced jaxpr, so they become initializers of the ONNX graph. Everything that does not depend
on NNX (the region, operands by name, layout and emission helpers) is core's fusion kit,
``jax2onnx.fusion``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
from flax import nnx
from jax2onnx.fusion import call_region, path_name


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
    # State leaves sit under the Variable's own "value" (or "raw_value") entry in some versions.
    named = [(path_name(p, drop_trailing=("value", "raw_value")), v) for p, v in flat]

    def run(leaves: list[Any], *xs: Any) -> Any:
        return body(nnx.merge(graphdef, jax.tree_util.tree_unflatten(treedef, leaves), rest), *xs)

    return call_region(mark, run, inputs, named, **static)

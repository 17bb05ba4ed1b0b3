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


def graphdef_node_types(obj: Any) -> list[tuple[Any, str]]:
    """Where an NNX ``GraphDef`` reachable from the exported callable records its modules' classes
    (``NodeDef.type``, and ``metadata`` where it is the same class): a model split before the
    export and ``nnx.merge``d inside it (a functional training step, layers scanned with
    ``lax.scan``) is rebuilt from these, so they hold the export's overriding subclass while it
    runs (a :class:`jax2onnx.plugin.ModulePatch` ``holders`` function)."""
    try:
        is_graphdef = isinstance(obj, nnx.GraphDef)
    except TypeError:  # flax < 0.11: GraphDef is a Union alias of NodeDef / NodeRef
        is_graphdef = type(obj).__name__ == "NodeDef"
    if not is_graphdef:
        return []
    out: list[tuple[Any, str]] = []
    stack, seen = [obj], set()
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        held = getattr(node, "type", None)
        if isinstance(held, type) and hasattr(node, "index"):
            out.append((node, "type"))
            if getattr(node, "metadata", None) is held:
                out.append((node, "metadata"))
        stack.extend(getattr(node, "nodes", None) or ())  # flax >= 0.11: one flat list of defs
        subgraphs = getattr(node, "subgraphs", None) or ()  # earlier flax: nested defs
        stack.extend(v for _, v in (subgraphs.items() if isinstance(subgraphs, Mapping) else subgraphs))
    return out

"""The Linen part of the pack's fusions: run a Linen module's own ``__call__`` as a marked region
(everything library-independent, such as reading the operands back, is core's fusion kit,
``jax2onnx.fusion``).

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
from flax import linen as nn
from jax2onnx.fusion import call_region, linen_calls, path_name

__all__ = ["call_module", "fusable", "linen_calls"]


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
    named = [(path_name(path, skip=1), v) for path, v in flat]
    unbound = module.clone(parent=None)

    def run(leaves: list[Any], *xs: Any) -> Any:
        return nn.apply(body, unbound)(jax.tree_util.tree_unflatten(treedef, leaves), *xs)

    return call_region(mark, run, inputs, named, **static)



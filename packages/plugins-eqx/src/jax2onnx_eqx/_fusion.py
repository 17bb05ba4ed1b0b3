"""The Equinox part of the pack's fusions: run an Equinox module's own ``__call__`` as a marked
region (everything library-independent, such as reading the operands back, is core's fusion kit,
``jax2onnx.fusion``).

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
from jax2onnx.fusion import call_region, path_name, static_ints

__all__ = ["call_module", "from_onnx_batch", "no_extras", "onnx_batch"]


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

    def run(leaves: list[Any], *xs: Any) -> Any:
        return body(eqx.combine(jax.tree_util.tree_unflatten(treedef, leaves), rest), *xs)

    return call_region(mark, run, inputs, [(path_name(p), v) for p, v in flat], **static)


# ---------------------------------------------------------------------------------------------
# Lowering side: equinox layers take one example, ONNX's Conv/pools/GroupNormalization a batch


def onnx_batch(ctx: Any, x: Any, shape: Sequence[Any], batch: int) -> Any | None:
    """``x`` (``batch`` vmapped axes in front of one example of ``shape``) with ONNX's one batch
    axis N: an Unsqueeze for one example, as it is under one vmap, the vmaps' axes folded into N
    with a Reshape under several (None when the example's dims are not static)."""
    if batch == 0:
        return ctx.op.Unsqueeze(x, ctx.i64([0]))
    if batch == 1:
        return x
    example = list(shape[batch:])
    if not static_ints(example):
        return None
    return ctx.op.Reshape(x, ctx.i64([-1, *example]))


def from_onnx_batch(ctx: Any, y: Any, batch: int) -> Any:
    """Back from ONNX's batch axis N to the region's output (:func:`onnx_batch` undone)."""
    if batch == 0:
        return ctx.op.Squeeze(y, ctx.i64([0]))
    if batch == 1:
        return y
    return ctx.op.Reshape(y, ctx.shape_tensor(ctx.avals_out[0].shape))

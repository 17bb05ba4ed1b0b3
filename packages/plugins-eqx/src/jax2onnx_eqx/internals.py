"""Equinox's internal primitives, and its runtime error checks.

Code built on Equinox (its own ``while_loop``, diffrax, optimistix, lineax) binds a handful of
primitives JAX does not know. Exported, outside ``vmap`` they are:

- ``unvmap_any`` / ``unvmap_all``: "any/all of every element, batch included" → a count of the
  true (false) elements compared with 0 (an empty input gives False / True, as in JAX);
- ``unvmap_max``: the maximum over every element → ``ReduceMax``;
- ``nonbatchable``, ``nontraceable``: the identity (they only assert at trace time);
- ``select_if_vmap``: ``x``, whatever the predicate (equinox's impl and lowering rule: a predicate
  that is not batched is taken to be true; under ``vmap`` a batched predicate makes equinox's
  batching rule bind ``lax.select`` instead, which the lax pack lowers to ``Where``);
- ``maybe_set`` (the loop buffers diffrax saves into) and ``vprim`` (equinox's batched form of such
  primitives): equinox's own impl rule, traced and lowered like any JAX code.

Runtime checks (``eqx.error_if``, ``eqx.branched_error_if``, and everything built on them, which is
where equinox's ``pure_callback`` error raising lives) are **dropped** from the graph: ONNX has no
way to raise, and a graph that returned NaN or an extra flag instead would compute something the
JAX function does not. A check whose predicate is known while tracing to be true fails the export (JAX
would raise on every call); a check on traced values leaves no node, and the exported model
returns what JAX returns whenever the check passes. Validate inputs before calling the model if the
checks matter at run time.

Two routes lead there. Usually the export's patch of ``branched_error_if_impl_jit`` sees the check
while tracing. But JAX reuses the jaxpr of a ``jit`` already traced with the same shapes, so when
the library code ran (or was traced) before the export — diffrax imported and the solve set up
first, as users do — the jaxpr holds equinox's own ``cond(pred, <pure_callback that raises>, x)``.
Such a ``cond`` is lowered as its passing branch (:func:`lower_cond_dropping_checks`), the same
dropped check; any other ``cond`` goes to the lax pack's lowering.
"""

from __future__ import annotations

import jax
import numpy as np
from jax2onnx import compat
from jax2onnx.plugin import Lowerings, Patch
from jax2onnx_lax.control_flow import lower_cond

lowerings = Lowerings()


@lowerings.register("unvmap_any")
def lower_unvmap_any(ctx, x):
    count = ctx.op.ReduceSum(ctx.cast(ctx.cast(x, np.bool_), np.int64), keepdims=0)
    return ctx.op.Greater(count, ctx.i64(0))


@lowerings.register("unvmap_all")
def lower_unvmap_all(ctx, x):
    failing = ctx.op.ReduceSum(ctx.cast(ctx.op.Not(ctx.cast(x, np.bool_)), np.int64), keepdims=0)
    return ctx.op.Equal(failing, ctx.i64(0))


@lowerings.register("unvmap_max", dtypes=[np.int32, np.int64, np.float32, np.float64])
def lower_unvmap_max(ctx, x):
    if len(ctx.avals_in[0].shape) == 0:
        return ctx.op.Identity(x)
    return ctx.op.ReduceMax(x, keepdims=0)


@lowerings.register("nonbatchable", "nontraceable")
def lower_identity(ctx, x):
    return ctx.op.Identity(x)


@lowerings.register("select_if_vmap")
def lower_select_if_vmap(ctx, pred, x, y):
    # An unbatched select_if_vmap is x, not Where(pred, x, y): equinox's impl and XLA lowering
    # return x without reading pred (a False pred here means "no vmap", not "take y").
    return ctx.op.Identity(x)


@lowerings.register("maybe_set", "vprim")
def lower_by_impl(ctx, *ins):
    """``maybe_set`` (the buffer write of equinox's checkpointed/bounded loops, used by diffrax's
    ``SaveAt``): equinox's own impl rule — ``xs.at[i].set(select_if_vmap(pred, x, xs[i]))`` — traced
    with the equation's params and lowered like any other JAX code (a scatter and a Where). ``vprim``
    is how equinox binds such a primitive under ``vmap``; its impl is ``vmap`` of the inner rule."""
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in ctx.avals_in]
    closed = jax.make_jaxpr(lambda *xs: ctx.eqn.primitive.impl(*xs, **ctx.params))(*specs)
    return ctx.lower_jaxpr(closed, ins)


def _patch_error_if(original):
    """``equinox._errors.branched_error_if_impl_jit``, through which every error check runs."""

    def branched_error_if_impl_jit(x, pred, index, msgs, *args, **kwargs):
        traced = any(compat.is_tracer(leaf) for leaf in jax.tree_util.tree_leaves((pred, index)))
        if not traced and bool(np.any(np.asarray(pred))):
            # Known while tracing to fail for every input: JAX would raise on every call, so
            # the export fails now rather than produce a model that silently never checks.
            which = int(np.max(np.asarray(index)))
            raise ValueError(f"an equinox check fails for every input: {msgs[which]}")
        return x  # passes for every input, or a runtime check: dropped (see the module docstring)

    return branched_error_if_impl_jit


patches = [Patch("equinox._errors", "branched_error_if_impl_jit", _patch_error_if)]

#: The callbacks equinox's ``_error`` binds in the failing branch of its check (``raise`` mode:
#: ``raises`` then ``tpu_msg``; ``breakpoint`` mode: ``display_msg`` then ``to_nan``).
_ERROR_CALLBACKS = {"raises", "tpu_msg", "display_msg", "to_nan"}


def _is_error_branch(closed) -> bool:
    """The branch binds one of equinox's error callbacks (``equinox._errors._error``)."""
    for eqn in closed.jaxpr.eqns:
        if eqn.primitive.name == "pure_callback":
            callback = eqn.params.get("callback")
            fn = getattr(callback, "callback_func", callback)
            if getattr(fn, "__module__", "") == "equinox._errors" and getattr(fn, "__name__", "") in _ERROR_CALLBACKS:
                return True
    return False


@lowerings.register("cond", priority=1)  # outranks the lax pack's cond, which it calls for every other cond
def lower_cond_dropping_checks(ctx, index, *operands):
    """``cond(pred, <equinox's error callbacks>, x)`` from a jaxpr traced before the export: the
    passing branch, i.e. the check dropped as the patch drops it (branch 0 is ``lax.cond``'s false
    branch, the one that returns ``x``)."""
    branches = ctx.params["branches"]
    if len(branches) == 2 and _is_error_branch(branches[1]) and not _is_error_branch(branches[0]):
        return ctx.lower_jaxpr(branches[0], operands)
    return lower_cond(ctx, index, *operands)

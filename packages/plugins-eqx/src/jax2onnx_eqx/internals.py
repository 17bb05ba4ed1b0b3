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
where equinox's ``pure_callback`` error raising lives) follow ``EQX_ON_ERROR`` (or the call's own
``on_error=``), as equinox documents it:

- ``nan``: the check is a graph computation, equinox's own: ``x`` where the predicate holds for no
  element, else NaN (integers: their maximum, bools: True) — an ``If``, matching JAX exactly;
- ``off``: no check, no node (equinox traces none either);
- ``raise`` (the default) and ``breakpoint``: ONNX can neither raise nor open a debugger, so the
  check is **dropped** with a :class:`DroppedCheckWarning` naming it (once per check and export),
  and the model returns what JAX returns whenever the check passes. Validate inputs before calling
  the model if the check matters at run time, or export under ``EQX_ON_ERROR=nan`` to get NaN
  where JAX would raise. A check whose predicate is known while tracing to be true fails the
  export (JAX would raise on every call).

Nothing of equinox is replaced: a traced check is equinox's own ``cond(pred, <pure_callbacks
that raise>, x)`` (inside its ``filter_jit``), which :func:`lower_cond_dropping_checks` lowers as
its passing branch, with the warning; a ``nan``-mode check is equinox's plain ``cond`` of NaN and
goes, like any other ``cond``, to the lax pack's lowering (equinox builds its NaN with
``np.broadcast_to``, so ``nan`` mode traces with static shapes only, in JAX as in an export).
"""

from __future__ import annotations

import warnings
import weakref

import jax
import numpy as np
from jax2onnx.plugin import Lowerings
from jax2onnx_lax.control_flow import lower_cond

lowerings = Lowerings()


class DroppedCheckWarning(UserWarning):
    """An equinox runtime check (``eqx.error_if`` and what is built on it) left out of the exported
    graph: under ``EQX_ON_ERROR=raise`` or ``breakpoint`` ONNX has no way to do what JAX does when it
    fails. The message names the check; export under ``EQX_ON_ERROR=nan`` for a graph that returns
    NaN instead."""


def _warn_dropped(msgs, mode: str, seen: set) -> None:
    """Warn once per check (its messages) for the export that ``seen`` belongs to."""
    key = tuple(str(m) for m in msgs)
    if key in seen:
        return
    seen.add(key)
    what = " / ".join(repr(m) for m in key) or "(no message)"
    warnings.warn(
        f"equinox check {what} dropped from the ONNX graph: EQX_ON_ERROR={mode} cannot be expressed in ONNX "
        "(no way to raise or break there), so the model returns the unchecked value where JAX would "
        f"{'raise' if mode == 'raise' else 'open a debugger'}. Set EQX_ON_ERROR=nan before importing equinox "
        "for a graph that returns NaN instead, or validate inputs before calling the model.",
        DroppedCheckWarning, stacklevel=3)


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


#: The callbacks equinox's ``_error`` binds in the failing branch of its check (``raise`` mode:
#: ``raises`` then ``tpu_msg``; ``breakpoint`` mode: ``display_msg`` then ``to_nan``).
_ERROR_CALLBACKS = {"raises", "tpu_msg", "display_msg", "to_nan"}


def _error_callbacks(closed) -> list:
    """The functions of equinox's error callbacks (``equinox._errors._error``) the branch binds."""
    found = []
    for eqn in closed.jaxpr.eqns:
        if eqn.primitive.name == "pure_callback":
            callback = eqn.params.get("callback")
            fn = getattr(callback, "callback_func", callback)
            if getattr(fn, "__module__", "") == "equinox._errors" and getattr(fn, "__name__", "") in _ERROR_CALLBACKS:
                found.append(fn)
    return found


def _check_messages(callbacks) -> list[str]:
    """The messages the check would raise, read from the callbacks' closures (``msgs``)."""
    for fn in callbacks:
        cells = dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))
        if "msgs" in cells:
            return list(cells["msgs"].cell_contents)
    return []


#: Checks already warned about, per export (its Interpreter): the warning is once per check.
_WARNED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


@lowerings.register("cond", priority=1)  # outranks the lax pack's cond, which it calls for every other cond
def lower_cond_dropping_checks(ctx, index, *operands):
    """``cond(pred, <equinox's error callbacks>, x)``, equinox's runtime check: the passing branch,
    i.e. the check dropped, with the warning (branch 0 is ``lax.cond``'s false branch, the one that
    returns ``x``)."""
    branches = ctx.params["branches"]
    if len(branches) == 2 and not _error_callbacks(branches[0]):
        callbacks = _error_callbacks(branches[1])
        if callbacks:
            mode = "breakpoint" if any(fn.__name__ in ("display_msg", "to_nan") for fn in callbacks) else "raise"
            _warn_dropped(_check_messages(callbacks), mode, _WARNED.setdefault(ctx.interp, set()))
            return ctx.lower_jaxpr(branches[0], operands)
    return lower_cond(ctx, index, *operands)

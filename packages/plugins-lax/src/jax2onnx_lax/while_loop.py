"""lax ``while`` → ONNX ``Loop`` (``while_loop``, and ``fori_loop`` with traced bounds).

The plain form evaluates the condition once before the loop and again at the end of each body.
Two shapes JAX produces get a better Loop: ``fori_loop`` with traced bounds (``i < upper``,
``i + 1``) runs a counted Loop with no condition at all, and a batched condition (``vmap`` of a
while_loop) runs while any row holds, finished rows keeping their carry. Static-bound
``fori_loop`` is a ``scan`` in JAX (see :mod:`.scan`).
"""

from __future__ import annotations

import numpy as np
from jax2onnx.plugin import Lowerings

from .control_flow import BOOL_SCALAR, INT64_SCALAR, as_list

lowerings = Lowerings()


@lowerings.register("while")
def lower_while(ctx, *args):
    """``Loop`` without a trip count: the condition is evaluated once before the loop, and again at
    the end of every body on the new carry, which is exactly ``while cond(c): c = body(c)``."""
    p = ctx.params
    n_cond, n_body = p["cond_nconsts"], p["body_nconsts"]
    cond_consts = list(args[:n_cond])
    body_consts = list(args[n_cond : n_cond + n_body])
    init = list(args[n_cond + n_body :])
    carry_avals = ctx.avals_in[n_cond + n_body :]
    pred_aval = p["cond_jaxpr"].out_avals[0]
    if pred_aval.shape != ():
        return _lower_batched_while(ctx, p, cond_consts, body_consts, init, carry_avals, pred_aval)

    if _is_counted_loop(p):
        return _lower_counted_loop(ctx, p, body_consts, init, carry_avals)

    (keep_going,) = ctx.lower_jaxpr(p["cond_jaxpr"], cond_consts + init)

    body = ctx.subgraph("while_body")
    body.add_input("iteration", INT64_SCALAR)
    body.add_input("cond_in", BOOL_SCALAR)
    carry = [body.add_input("carry", a) for a in carry_avals]
    new_carry = body.lower(p["body_jaxpr"], body_consts + carry)
    (again,) = body.lower(p["cond_jaxpr"], cond_consts + new_carry)
    graph = body.finish([again, *new_carry], [BOOL_SCALAR, *carry_avals])
    return as_list(ctx.op.Loop(None, keep_going, *init, body=graph, _outputs=len(init)))


def _is_counted_loop(p) -> bool:
    """The while JAX makes of ``fori_loop`` with traced bounds: carry ``(i, upper, ...)``, condition
    exactly ``i < upper``, body ``i + 1`` and ``upper`` passed through."""
    cond, body = p["cond_jaxpr"].jaxpr, p["body_jaxpr"].jaxpr
    if p["cond_nconsts"] or len(cond.eqns) != 1 or len(cond.invars) < 2:
        return False
    (lt,) = cond.eqns
    if lt.primitive.name != "lt" or list(lt.invars) != list(cond.invars[:2]) or list(cond.outvars) != list(lt.outvars):
        return False
    n = p["body_nconsts"]
    i_in, upper_in = body.invars[n], body.invars[n + 1]
    if body.outvars[1] is not upper_in or np.dtype(i_in.aval.dtype).kind not in "iu":
        return False
    step = next((e for e in body.eqns if e.outvars[0] is body.outvars[0]), None)
    if step is None or step.primitive.name != "add":
        return False
    others = [a for a in step.invars if a is not i_in]
    return len(others) == 1 and _is_literal_one(others[0])


def _is_literal_one(a) -> bool:
    val = getattr(a, "val", None)
    return val is not None and np.ndim(val) == 0 and int(val) == 1


def _lower_counted_loop(ctx, p, body_consts, init, carry_avals):
    """``Loop`` with trip count ``max(upper - i, 0)`` and no condition to evaluate."""
    lower, upper = init[0], init[1]
    trips = ctx.cast(ctx.op.Max(ctx.op.Sub(upper, lower), 0), np.int64)
    body = ctx.subgraph("fori_body")
    body.add_input("iteration", INT64_SCALAR)
    cond_in = body.add_input("cond_in", BOOL_SCALAR)
    carry = [body.add_input("carry", a) for a in carry_avals]
    new_carry = body.lower(p["body_jaxpr"], body_consts + carry)
    graph = body.finish([cond_in, *new_carry], [BOOL_SCALAR, *carry_avals])
    return as_list(ctx.op.Loop(trips, None, *init, body=graph, _outputs=len(init)))


def _any(where, pred):
    """Scalar OR of a bool tensor (ONNX reduces numbers, not bools)."""
    return where.cast(where.op.ReduceMax(where.cast(pred, np.int32), keepdims=0), np.bool_)


def _select_rows(where, pred, pred_rank, new, old, aval):
    """``new`` where the row's predicate holds, else ``old``: the predicate covers the leading axes.
    The carry's stored rank counts, not its aval's: complex pairs and PRNG key data add trailing axes."""
    extra = len(old.shape) - pred_rank
    mask = pred if extra == 0 else where.op.Unsqueeze(pred, where.i64(range(pred_rank, pred_rank + extra)))
    return where.op.Where(mask, new, old)


def _lower_batched_while(ctx, p, cond_consts, body_consts, init, carry_avals, pred_aval):
    """A while whose condition is batched (``vmap`` of a while_loop): it runs while any row's
    condition holds, and rows whose condition is false keep their carry (XLA's semantics). The
    row predicates travel as an extra loop state so the condition is evaluated once per step."""
    (rows,) = ctx.lower_jaxpr(p["cond_jaxpr"], cond_consts + init)
    rank = len(pred_aval.shape)

    body = ctx.subgraph("while_body")
    body.add_input("iteration", INT64_SCALAR)
    body.add_input("cond_in", BOOL_SCALAR)
    active = body.add_input("active_rows", pred_aval)
    carry = [body.add_input("carry", a) for a in carry_avals]
    stepped = body.lower(p["body_jaxpr"], body_consts + carry)
    kept = [_select_rows(body, active, rank, n, o, a) for n, o, a in zip(stepped, carry, carry_avals, strict=True)]
    (next_rows,) = body.lower(p["cond_jaxpr"], cond_consts + kept)
    graph = body.finish([_any(body, next_rows), next_rows, *kept], [BOOL_SCALAR, pred_aval, *carry_avals])
    outs = as_list(ctx.op.Loop(None, _any(ctx, rows), rows, *init, body=graph, _outputs=len(init) + 1))
    return outs[1:]

"""lax ``while`` → ONNX ``Loop`` (``while_loop``, and ``fori_loop`` with traced bounds).

The plain form evaluates the condition once before the loop and again at the end of each body.
Two shapes JAX produces get a better Loop: ``fori_loop`` with traced bounds (``i < upper``,
``i + 1``) runs a counted Loop with no condition at all, and a batched condition (``vmap`` of a
while_loop) runs while any row holds, finished rows keeping their carry. Static-bound
``fori_loop`` is a ``scan`` in JAX (see :mod:`.scan`).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from .control_flow import BOOL_SCALAR, INT64_SCALAR, as_list, loop_state_static

lowerings = Lowerings()


def _ints(shape: tuple[Any, ...]) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, jnp.int32)


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



# ---------------------------------------------------------------------------------------------
# testcases


def while_loop_counter(x):
    return lax.while_loop(lambda c: c[0] < 5, lambda c: (c[0] + 1, c[1] + c[0].astype(c[1].dtype)), (0, x))[1]


def while_loop_vector(x):
    return lax.while_loop(lambda v: jnp.sum(v) < 50.0, lambda v: v * 1.5 + 1.0, jnp.abs(x))


def while_loop_pytree_carry(x, n):
    def body(c):
        return {"k": c["k"] + 1, "acc": c["acc"] + c["x"], "x": c["x"] * 0.5}

    out = lax.while_loop(lambda c: c["k"] < n, body, {"k": jnp.int32(0), "acc": jnp.zeros_like(x), "x": x})
    return out["acc"], out["k"]


def while_loop_flag_carry(x):
    # The condition is a carried flag: the body output doubles as the Loop's condition output.
    def body(c):
        v, _ = c
        v = v * 0.5
        return v, jnp.max(jnp.abs(v)) > 0.1

    return lax.while_loop(lambda c: c[1], body, (x, True))[0]


def while_loop_vmapped(x):
    # Under vmap each row stops at its own step: JAX ORs the predicates and selects in the body.
    def halve_until_small(v):
        return lax.while_loop(lambda u: jnp.sum(jnp.abs(u)) > 0.5, lambda u: u * 0.5, v)

    return jax.vmap(halve_until_small)(x)


def fori_loop_counter(x):
    return lax.fori_loop(0, 5, lambda i, v: v + i.astype(v.dtype), x)


def fori_loop_zero(x):
    return lax.fori_loop(0, 0, lambda i, v: v * 2.0 + 1.0, x)


def fori_loop_vector(x):
    return lax.fori_loop(0, 4, lambda i, v: v.at[i].set(v[i] * 2.0 + i), x)


def fori_loop_example(x):
    def body(i, carry):
        s, v = carry
        return s + jnp.sum(v), v * 0.9
    return lax.fori_loop(1, 6, body, (jnp.zeros((), x.dtype), x))


def fori_loop_traced_bounds(x, lo, hi):
    return lax.fori_loop(lo, hi, lambda i, v: v * 1.1 + i.astype(v.dtype), x)


components = [
    Component(
        name="lax.while_loop",
        onnx=["Loop"],
        since="v0.5.1",
        testcases=[
            Testcase("while_loop_counter", while_loop_counter, [("B", 3)], expected_ops=["Loop"]),
            Testcase("while_loop_vector", while_loop_vector, [("B",)], expected_ops=["Loop"]),
            Testcase("while_loop_pytree_carry", while_loop_pytree_carry, [(3, "B"), _ints(())], expected_ops=["Loop"],
                     check=lambda m, _variant: loop_state_static(m, [3, None])),
            Testcase("while_loop_flag_carry", while_loop_flag_carry, [("B", 2)], expected_ops=["Loop"]),
            Testcase("while_loop_vmapped", while_loop_vmapped, [("B", 3)], expected_ops=["Loop"]),
        ],
    ),
    Component(
        name="lax.fori_loop",
        onnx=["Loop"],
        since="v0.5.1",
        testcases=[
            Testcase("fori_loop_counter", fori_loop_counter, [("B", 2)], expected_ops=["Loop"]),
            Testcase("fori_loop_zero", fori_loop_zero, [("B", 2)]),
            Testcase("fori_loop_vector", fori_loop_vector, [(4,)], expected_ops=["Loop"]),
            Testcase("fori_loop_example", fori_loop_example, [("B", 3)], expected_ops=["Loop"]),
            Testcase("fori_loop_traced_bounds", fori_loop_traced_bounds, [(2, 3), _ints(()), _ints(())],
                     input_generator=lambda rng, shape, dt: rng.integers(-2, 6, shape) if dt.kind == "i"
                     else rng.standard_normal(shape),
                     expected_ops=["Loop"], forbidden_ops=["Less"], check=lambda m, _variant: loop_state_static(m, [2, 3])),
        ],
    ),
]

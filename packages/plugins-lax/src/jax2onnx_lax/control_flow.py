"""lax control flow: ``cond`` → ``If`` (nested for an N-way ``switch``), ``while`` → ``Loop``.

Branch and body graphs read outer values (operands, closed-over constants) directly, as ONNX allows,
so only loop-carried values become subgraph inputs. Every subgraph input and output is typed from
the JAX avals, which keeps the static shapes JAX knows (a fixed-size loop state stays ``3x3``).
``scan`` (and the static-bound ``fori_loop`` JAX turns into a scan) lives in :mod:`.scan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import onnx_ir as ir
from jax import lax
from jax2onnx.builder import Scope
from jax2onnx.context import SubgraphBuilder
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

lowerings = Lowerings()

#: Aval of the scalar condition a ``Loop`` body returns first.
BOOL_SCALAR = jax.ShapeDtypeStruct((), np.bool_)
#: Aval of the iteration counter a ``Loop`` body receives first.
INT64_SCALAR = jax.ShapeDtypeStruct((), np.int64)


def nested_subgraph(ctx: Any, parent: Any, name: str) -> SubgraphBuilder:
    """A subgraph inside ``parent`` (a ``ctx`` or a :class:`SubgraphBuilder`), for Ifs in an else branch."""
    if parent is ctx:
        return ctx.subgraph(name)
    return SubgraphBuilder(ctx, Scope(ctx.scope.model, kind="subgraph", parent=parent.scope), name)


def as_list(outs: Any) -> list[Any]:
    return list(outs) if isinstance(outs, tuple) else [outs]


# ---------------------------------------------------------------------------------------------
# cond


def _branch_graph(ctx: Any, parent: Any, closed: Any, operands: Sequence[Any], name: str) -> Any:
    sub = nested_subgraph(ctx, parent, name)
    outs = sub.lower(closed, operands)
    return sub.finish(outs, ctx.avals_out)


def _if_chain(ctx: Any, where: Any, index: Any, branches: Sequence[Any], operands: Sequence[Any], first: int) -> list[Any]:
    """``If(index < first+1, branch[first], <the same for the remaining branches>)``.

    Comparing with ``<`` sends an index below 0 to the first branch and one past the end to the
    last, which is the clamping ``lax.switch`` promises.
    """
    then_g = _branch_graph(ctx, where, branches[first], operands, f"cond_branch_{first}")
    if first + 1 == len(branches) - 1:
        else_g = _branch_graph(ctx, where, branches[first + 1], operands, f"cond_branch_{first + 1}")
    else:
        rest = nested_subgraph(ctx, where, f"cond_else_{first}")
        else_g = rest.finish(_if_chain(ctx, rest, index, branches, operands, first + 1), ctx.avals_out)
    pred = where.op.Less(index, np.asarray(first + 1, dtype=ctx.avals_in[0].dtype))
    outs = as_list(where.op.If(pred, then_branch=then_g, else_branch=else_g, _outputs=len(ctx.avals_out)))
    for v, aval in zip(outs, ctx.avals_out, strict=True):
        ctx.set_aval(v, aval)
    return outs


@lowerings.register("cond")
def lower_cond(ctx, index, *operands):
    branches = ctx.params["branches"]
    if len(branches) == 1:
        return ctx.lower_jaxpr(branches[0], operands)
    if index.const_value is not None:  # a literal index (lax.cond(True, ...)): no If needed
        chosen = int(np.clip(int(index.const_value.numpy()), 0, len(branches) - 1))
        return ctx.lower_jaxpr(branches[chosen], operands)
    if np.dtype(ctx.avals_in[0].dtype) == np.bool_:  # older JAX passed the predicate itself
        then_g = _branch_graph(ctx, ctx, branches[1], operands, "cond_true")
        else_g = _branch_graph(ctx, ctx, branches[0], operands, "cond_false")
        return as_list(ctx.op.If(index, then_branch=then_g, else_branch=else_g, _outputs=len(ctx.avals_out)))
    return _if_chain(ctx, ctx, index, branches, operands, 0)


@lowerings.register("empty", "empty2")
def lower_empty(ctx):
    """Uninitialised memory: JAX's placeholder for the residuals a cond branch does not compute
    (under ``grad``). Any value is correct; zeros are a constant."""
    aval = ctx.avals_out[0]
    if not ctx.is_static(aval.shape):
        zero = ctx.const(np.zeros((), dtype=aval.dtype))
        return ctx.op.Expand(zero, ctx.shape_tensor(aval.shape))
    return ctx.const(np.zeros(aval.shape, dtype=aval.dtype))


# ---------------------------------------------------------------------------------------------
# while


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
    trips = ctx.op.Cast(ctx.op.Max(ctx.op.Sub(upper, lower), np.zeros((), dtype=carry_avals[0].dtype)),
                        to=int(ir.DataType.INT64))
    body = ctx.subgraph("fori_body")
    body.add_input("iteration", INT64_SCALAR)
    cond_in = body.add_input("cond_in", BOOL_SCALAR)
    carry = [body.add_input("carry", a) for a in carry_avals]
    new_carry = body.lower(p["body_jaxpr"], body_consts + carry)
    graph = body.finish([cond_in, *new_carry], [BOOL_SCALAR, *carry_avals])
    return as_list(ctx.op.Loop(trips, None, *init, body=graph, _outputs=len(init)))


def _any(where, pred):
    """Scalar OR of a bool tensor (ONNX reduces numbers, not bools)."""
    as_int = where.op.Cast(pred, to=int(ir.DataType.INT32))
    return where.op.Cast(where.op.ReduceMax(as_int, keepdims=0), to=int(ir.DataType.BOOL))


def _select_rows(where, pred, pred_rank, new, old, aval):
    """``new`` where the row's predicate holds, else ``old``: the predicate covers the leading axes."""
    extra = len(aval.shape) - pred_rank
    mask = pred if extra == 0 else where.op.Unsqueeze(pred, np.arange(pred_rank, pred_rank + extra, dtype=np.int64))
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


def _ints(shape: tuple[Any, ...]) -> jax.ShapeDtypeStruct:
    return jax.ShapeDtypeStruct(shape, jnp.int32)


def cond_scalar(x):
    return lax.cond(x > 0, lambda v: v + 1.0, lambda v: v - 1.0, x)


def cond_multiple_operands_in_tuple(a, b, c):
    return lax.cond(a.sum() > b.sum(), lambda t: t[0] + t[1] - t[2], lambda t: t[0] - t[1] + t[2], (a, b, c))


def cond_my_new_complex_scenario(op1, op2):
    return lax.cond(
        jnp.all(op1 > 0),
        lambda t: (t[0] * 2 + t[1], jnp.sum(t[0], axis=(-2, -1))),
        lambda t: (t[0] - t[1] * 2, jnp.mean(t[0], axis=(-2, -1))),
        (op1, op2),
    )


def cond_nested_conditional(x, y, z):
    inner = lambda v: lax.cond(z.sum() > 0, lambda u: u * 10.0, lambda u: u / 10.0, v)  # noqa: E731
    return lax.cond(x.sum() > 0, inner, lambda v: v + 100.0, y)


def cond_variables(x, y):
    # Branches that close over traced outer values (not operands) and over each other's inputs.
    scale = jnp.max(y)
    return lax.cond(jnp.sum(x) > 0, lambda v: v * scale + y, lambda v: v - scale, x)


def cond_internal_constant(x):
    table = np.arange(12, dtype=np.float32).reshape(3, 4) / 7.0
    return lax.cond(x.sum() > 0, lambda v: v + table, lambda v: v * table, x)


def cond_grad(x):
    # Under grad each branch returns the residuals of both: the other's are JAX "empty" values.
    def loss(v):
        return jnp.sum(lax.cond(jnp.sum(v) > 0, lambda u: jnp.sin(u) * u, lambda u: jnp.cos(u), v))

    return jax.grad(loss)(x)


def switch_three_way(i, x):
    return lax.switch(i, [lambda v: v + 1.0, lambda v: v * 2.0, lambda v: jnp.sin(v)], x)


def switch_pytree(i, x, y):
    def left(ops):
        return {"sum": ops["a"] + ops["b"], "a": ops["a"] * 2.0}

    def mid(ops):
        return {"sum": ops["a"] - ops["b"], "a": ops["a"]}

    def right(ops):
        return {"sum": ops["b"], "a": -ops["a"]}

    out = lax.switch(i, [left, mid, right, left], {"a": x, "b": y})
    return out["sum"], out["a"]


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
        name="lax.cond",
        onnx=["If"],
        since="v0.5.1",
        testcases=[
            Testcase("cond_scalar", cond_scalar, [()], expected_ops=["If"]),
            Testcase("cond_multiple_operands_in_tuple", cond_multiple_operands_in_tuple, [("B", 2), ("B", 2), ("B", 2)],
                     expected_ops=["If"]),
            Testcase("cond_my_new_complex_scenario", cond_my_new_complex_scenario, [("B", 3, 4), (3, 4)],
                     expected_ops=["If"]),
            Testcase("cond_nested_conditional", cond_nested_conditional, [(2,), ("B",), (2,)], expected_ops=["If"],
                     check=lambda m: _count_ifs_at_least(m, 2)),
            Testcase("cond_variables", cond_variables, [("B", 3), ("B", 3)], expected_ops=["If"]),
            Testcase("cond_internal_constant", cond_internal_constant, [(3, 4)], expected_ops=["If"]),
            Testcase("cond_grad", cond_grad, [("B",)], expected_ops=["If"]),
            Testcase("cond_literal_predicate", lambda x: lax.cond(True, lambda v: v + 1.0, lambda v: v - 1.0, x),
                     [("B",)], forbidden_ops=["If"]),
            Testcase("cond_switch_three_way", switch_three_way, [_ints(()), ("B", 4)], expected_ops=["If"],
                     input_generator=lambda rng, shape, dt: rng.integers(-1, 4, shape) if dt.kind == "i"
                     else rng.standard_normal(shape),
                     check=lambda m: _count_ifs_at_least(m, 2)),
            Testcase("cond_switch_pytree_operands", switch_pytree, [_ints(()), ("B", 2), ("B", 2)], expected_ops=["If"]),
        ],
    ),
    Component(
        name="lax.while_loop",
        onnx=["Loop"],
        since="v0.5.1",
        testcases=[
            Testcase("while_loop_counter", while_loop_counter, [("B", 3)], expected_ops=["Loop"]),
            Testcase("while_loop_vector", while_loop_vector, [("B",)], expected_ops=["Loop"]),
            Testcase("while_loop_pytree_carry", while_loop_pytree_carry, [(3, "B"), _ints(())], expected_ops=["Loop"],
                     check=lambda m: loop_state_static(m, [3, None])),
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
                     expected_ops=["Loop"], forbidden_ops=["Less"], check=lambda m: loop_state_static(m, [2, 3])),
        ],
    ),
]


def _all_nodes(graph: Any) -> list[Any]:
    import onnx

    found = []
    for n in graph.node:
        found.append(n)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                found.extend(_all_nodes(a.g))
    return found


def _count_ifs_at_least(model: Any, k: int) -> None:
    count = sum(1 for n in _all_nodes(model.graph) if n.op_type == "If")
    assert count >= k, f"expected at least {k} If nodes, found {count}"


def loop_state_static(model: Any, dims: list[int | None]) -> None:
    """Some Loop body input has the static sizes ``dims`` (``None``: any), not ``?x?``."""
    for n in _all_nodes(model.graph):
        if n.op_type != "Loop":
            continue
        body = next(a.g for a in n.attribute if a.name == "body")
        for vi in body.input:
            shape = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
            if len(shape) == len(dims) and all(w is None or w == d for w, d in zip(dims, shape, strict=True)):
                return
    raise AssertionError(f"no Loop body input has static shape {dims}")

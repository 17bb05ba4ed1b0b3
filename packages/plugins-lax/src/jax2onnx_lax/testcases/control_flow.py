"""Testcases of :mod:`jax2onnx_lax.control_flow` (imported only by the pytest plugin and the coverage command)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.testing import Component, Testcase

from ._testdata import spec


def _all_nodes(graph: Any) -> list[Any]:
    import onnx

    found = []
    for n in graph.node:
        found.append(n)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                found.extend(_all_nodes(a.g))
    return found


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


def cond_without_outputs(x):
    # A cond kept only for its effect (as diffrax's progress meter is): no If, nothing to compute.
    lax.cond(jnp.sum(x) > 0, lambda: jax.debug.callback(lambda: None), lambda: None)
    return x * 2.0


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
                     check=lambda m, _variant: _count_ifs_at_least(m, 2)),
            Testcase("cond_variables", cond_variables, [("B", 3), ("B", 3)], expected_ops=["If"]),
            Testcase("cond_internal_constant", cond_internal_constant, [(3, 4)], expected_ops=["If"]),
            Testcase("cond_without_outputs", cond_without_outputs, [("B", 3)], forbidden_ops=["If"], max_nodes=1),
            Testcase("cond_grad", cond_grad, [("B",)], expected_ops=["If"]),
            Testcase("cond_literal_predicate", lambda x: lax.cond(True, lambda v: v + 1.0, lambda v: v - 1.0, x),
                     [("B",)], forbidden_ops=["If"]),
            Testcase("cond_switch_three_way", switch_three_way, [spec(), ("B", 4)], expected_ops=["If"],
                     input_generator=lambda rng, shape, dt: rng.integers(-1, 4, shape) if dt.kind == "i"
                     else rng.standard_normal(shape),
                     check=lambda m, _variant: _count_ifs_at_least(m, 2)),
            Testcase("cond_switch_pytree_operands", switch_pytree, [spec(), ("B", 2), ("B", 2)], expected_ops=["If"]),
        ],
    ),
]


def _count_ifs_at_least(model: Any, k: int) -> None:
    count = sum(1 for n in _all_nodes(model.graph) if n.op_type == "If")
    assert count >= k, f"expected at least {k} If nodes, found {count}"

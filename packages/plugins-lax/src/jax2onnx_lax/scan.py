"""lax ``scan`` → ONNX ``Scan`` when there are sequences to scan over, else ``Loop``.

``Scan`` maps one to one: carries are its state variables, ``xs`` its scan inputs, ``ys`` its
scan outputs, and ``reverse=True`` sets every input and output direction to reverse (JAX's
``ys[i]`` still lines up with ``xs[i]``). A scan without ``xs`` (``length=`` only, and every
static-bound ``fori_loop``) has nothing for ``Scan`` to take its length from, so it becomes a
``Loop`` with a constant trip count, whose stacked outputs are flipped afterwards when reversed.
``unroll`` only changes how XLA compiles the loop and is ignored.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax2onnx.plugin import Lowerings
from jax2onnx.testing import Component, Testcase

from .control_flow import BOOL_SCALAR, INT64_SCALAR, as_list, loop_state_static

lowerings = Lowerings()


@lowerings.register("scan")
def lower_scan(ctx, *args):
    p = ctx.params
    closed = p["jaxpr"]
    n_consts, n_carry = p["num_consts"], p["num_carry"]
    consts = list(args[:n_consts])
    init = list(args[n_consts : n_consts + n_carry])
    xs = list(args[n_consts + n_carry :])
    in_avals = closed.in_avals
    out_avals = closed.out_avals
    carry_avals = in_avals[n_consts : n_consts + n_carry]
    x_avals = in_avals[n_consts + n_carry :]
    y_avals = out_avals[n_carry:]
    n_out = len(ctx.avals_out)

    if xs:
        body = ctx.subgraph("scan_body")
        carry = [body.add_input("carry", a) for a in carry_avals]
        x_slices = [body.add_input("x", a) for a in x_avals]
        outs = body.lower(closed, consts + carry + x_slices)
        graph = body.finish(outs, out_avals)
        directions = {}
        if p["reverse"]:
            directions = {"scan_input_directions": [1] * len(xs), "scan_output_directions": [1] * len(y_avals)}
        return as_list(ctx.op.Scan(*init, *xs, body=graph, num_scan_inputs=len(xs), _outputs=n_out, **directions))

    body = ctx.subgraph("scan_body")
    body.add_input("iteration", INT64_SCALAR)
    cond_in = body.add_input("cond_in", BOOL_SCALAR)
    carry = [body.add_input("carry", a) for a in carry_avals]
    outs = body.lower(closed, consts + carry)
    graph = body.finish([cond_in, *outs], [BOOL_SCALAR, *out_avals])
    trip_count = ctx.i64(p["length"])
    results = as_list(ctx.op.Loop(trip_count, None, *init, body=graph, _outputs=n_out))
    if p["reverse"]:
        # Loop stacks ys in iteration order, i.e. from the last index down; JAX wants them by index.
        flip = {"starts": np.array([-1], np.int64), "ends": np.array([np.iinfo(np.int64).min], np.int64),
                "axes": np.array([0], np.int64), "steps": np.array([-1], np.int64)}
        results[n_carry:] = [
            ctx.op.Slice(y, flip["starts"], flip["ends"], flip["axes"], flip["steps"]) for y in results[n_carry:]
        ]
    return results


# ---------------------------------------------------------------------------------------------
# testcases


def scan_cumsum(xs):
    return lax.scan(lambda c, x: (c + x, c + x), jnp.zeros(xs.shape[1:], xs.dtype), xs)


def scan_carry_only(x):
    return lax.scan(lambda c, _: (c * 0.9 + 1.0, None), x, None, length=4)[0]


def scan_multiple_sequences(xs, ys):
    def step(c, xy):
        x, y = xy
        return c + x * y, x - y

    return lax.scan(step, jnp.zeros(xs.shape[1:], xs.dtype), (xs, ys))


def scan_multiple_carry(xs):
    def step(carry, x):
        s, p = carry
        return (s + x, p * 0.5 + x), s * p

    return lax.scan(step, (jnp.zeros(xs.shape[1:], xs.dtype), jnp.ones(xs.shape[1:], xs.dtype)), xs)


def scan_matrix_carry_multidim_xs(init, xs):
    # carry (3, 3), xs (T, 3, 3): a matrix recurrence that keeps its static shape in the body.
    return lax.scan(lambda m, x: (jnp.tanh(m * x + 0.1), jnp.sum(m, axis=0)), init, xs)


def scan_reverse(xs):
    return lax.scan(lambda c, x: (c * 0.5 + x, c), jnp.zeros(xs.shape[1:], xs.dtype), xs, reverse=True)


def scan_reverse_no_xs(x):
    return lax.scan(lambda c, _: (c + 1.0, c * 2.0), x, None, length=3, reverse=True)


def scan_closed_over_constant(xs, w):
    table = jnp.asarray(np.linspace(-1.0, 1.0, 4), dtype=xs.dtype)
    return lax.scan(lambda c, x: (c * table + x * w, c), jnp.zeros_like(w), xs, unroll=2)


def scan_nested_cond(xs):
    def step(c, x):
        c = lax.cond(jnp.sum(x) > 0, lambda v: v + x, lambda v: v - x, c)
        return c, c

    return lax.scan(step, jnp.zeros(xs.shape[1:], xs.dtype), xs)


def scan_nested_fori(xs):
    def step(c, x):
        inner = lax.fori_loop(0, 2, lambda i, v: v * 0.5 + x, c)
        return inner, inner.sum()

    return lax.scan(step, jnp.zeros(xs.shape[1:], xs.dtype), xs)


components = [
    Component(
        name="lax.scan",
        onnx=["Scan", "Loop"],
        since="v0.5.1",
        testcases=[
            Testcase("scan_cumsum", scan_cumsum, [("T", 3)], expected_ops=["Scan"]),
            Testcase("scan_carry_only", scan_carry_only, [("B", 3)], expected_ops=["Loop"]),
            Testcase("scan_multiple_sequences", scan_multiple_sequences, [("T", 2), ("T", 2)], expected_ops=["Scan"]),
            Testcase("scan_multiple_carry", scan_multiple_carry, [("T", 3)], expected_ops=["Scan"]),
            Testcase("scan_matrix_carry_multidim_xs", scan_matrix_carry_multidim_xs, [(3, 3), ("T", 3, 3)],
                     expected_ops=["Scan"], check=lambda m, _variant: _scan_state_static(m, [3, 3])),
            Testcase("scan_reverse", scan_reverse, [("T", 2)], expected_ops=["Scan"]),
            Testcase("scan_reverse_no_xs", scan_reverse_no_xs, [("B",)], expected_ops=["Loop"]),
            Testcase("scan_closed_over_constant", scan_closed_over_constant, [("T", 4), (4,)], expected_ops=["Scan"]),
            Testcase("scan_lax_map", lambda xs: lax.map(lambda r: jnp.sin(r) * jnp.sum(r), xs), [("T", 3)],
                     expected_ops=["Scan"]),
            Testcase("scan_nested_cond", scan_nested_cond, [("T", 2)], expected_ops=["Scan", "If"]),
            Testcase("scan_nested_fori", scan_nested_fori, [("T", 3)], expected_ops=["Scan", "Loop"],
                     check=lambda m, _variant: loop_state_static(m, [3])),
        ],
    ),
]


def _scan_state_static(model, dims):
    for n in model.graph.node:
        if n.op_type == "Scan":
            body = next(a.g for a in n.attribute if a.name == "body")
            shape = [d.dim_value if d.HasField("dim_value") else None for d in body.input[0].type.tensor_type.shape.dim]
            assert shape == dims, f"Scan state typed {shape}, JAX knows {dims}"
            return
    raise AssertionError("no Scan node")


del jax

"""lax ``scan`` → ONNX ``Scan`` when there are sequences to scan over, else ``Loop``.

``Scan`` maps one to one: carries are its state variables, ``xs`` its scan inputs, ``ys`` its
scan outputs, and ``reverse=True`` sets every input and output direction to reverse (JAX's
``ys[i]`` still lines up with ``xs[i]``). A scan without ``xs`` (``length=`` only, and every
static-bound ``fori_loop``) has nothing for ``Scan`` to take its length from, so it becomes a
``Loop`` with a constant trip count, whose stacked outputs are flipped afterwards when reversed.
``unroll`` only changes how XLA compiles the loop and is ignored.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.plugin import Lowerings

from .control_flow import BOOL_SCALAR, INT64_SCALAR, as_list

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

"""lax ``scan`` → ONNX ``Scan`` when there are sequences to scan over, else ``Loop``.

``Scan`` maps one to one: carries are its state variables, ``xs`` its scan inputs, ``ys`` its
scan outputs, and ``reverse=True`` sets every input and output direction to reverse (JAX's
``ys[i]`` still lines up with ``xs[i]``). A scan without ``xs`` (``length=`` only, and every
static-bound ``fori_loop``) has nothing for ``Scan`` to take its length from, so it becomes a
``Loop`` with a constant trip count, whose stacked outputs are flipped afterwards when reversed.
``unroll`` only changes how XLA compiles the loop and is ignored.

onnxruntime's ``Scan`` fails over zero iterations ("Invalid dim0_offset of 0") where JAX returns
the initial carries and empty ``ys``: a scan of static length 0 is exactly that, and one of
symbolic length is an ``If`` on ``length == 0`` with that branch and the ``Scan`` in the other.
The same for the ``Loop`` of a scan without ``xs``, whose stacked outputs onnxruntime shapes wrongly
after zero iterations (``(0, 0)`` for a ``(0, 2)``).
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
    y_avals = closed.out_avals[n_carry:]
    n_out = len(ctx.avals_out)

    def run(where):
        if xs:
            return _scan(ctx, where, consts, init, xs, closed, n_out)
        return _loop(ctx, where, consts, init, closed, n_out)

    length = p["length"]
    if ctx.is_static([length]):
        return _zero_iterations(ctx, ctx, init, y_avals) if int(length) == 0 else run(ctx)
    is_empty = ctx.op.Equal(ctx.dim_scalar(length), ctx.const(0, np.int64))
    empty, running = ctx.subgraph("scan_empty"), ctx.subgraph("scan_running")
    empty_outs = empty.finish(_zero_iterations(ctx, empty, init, y_avals), ctx.avals_out)
    running_outs = running.finish(run(running), ctx.avals_out)
    return as_list(ctx.op.If(is_empty, then_branch=empty_outs, else_branch=running_outs, _outputs=n_out))


def _loop(ctx, where, consts, init, closed, n_out):
    """A scan without ``xs``: a ``Loop`` of ``length`` iterations (emitted by ``where``)."""
    p = ctx.params
    n_consts, n_carry = p["num_consts"], p["num_carry"]
    body = where.subgraph("scan_body")
    body.add_input("iteration", INT64_SCALAR)
    cond_in = body.add_input("cond_in", BOOL_SCALAR)
    carry = [body.add_input("carry", a) for a in closed.in_avals[n_consts : n_consts + n_carry]]
    outs = body.lower(closed, consts + carry)
    graph = body.finish([cond_in, *outs], [BOOL_SCALAR, *closed.out_avals])
    trip_count = ctx.i64(p["length"])  # static: JAX needs xs for a symbolic length
    results = as_list(where.op.Loop(trip_count, None, *init, body=graph, _outputs=n_out))
    if p["reverse"]:
        # Loop stacks ys in iteration order, i.e. from the last index down; JAX wants them by index.
        flip = {"starts": np.array([-1], np.int64), "ends": np.array([np.iinfo(np.int64).min], np.int64),
                "axes": np.array([0], np.int64), "steps": np.array([-1], np.int64)}
        results[n_carry:] = [
            where.op.Slice(y, flip["starts"], flip["ends"], flip["axes"], flip["steps"]) for y in results[n_carry:]
        ]
    return results


def _scan(ctx, where, consts, init, xs, closed, n_out):
    """The ONNX ``Scan`` (emitted by ``where``: the graph itself, or the If branch of a length that
    may be 0)."""
    p = ctx.params
    n_consts, n_carry = p["num_consts"], p["num_carry"]
    in_avals = closed.in_avals
    body = where.subgraph("scan_body")
    carry = [body.add_input("carry", a) for a in in_avals[n_consts : n_consts + n_carry]]
    x_slices = [body.add_input("x", a) for a in in_avals[n_consts + n_carry :]]
    outs = body.lower(closed, consts + carry + x_slices)
    graph = body.finish(outs, closed.out_avals)
    directions = {}
    if p["reverse"]:
        n_ys = len(closed.out_avals) - n_carry
        directions = {"scan_input_directions": [1] * len(xs), "scan_output_directions": [1] * n_ys}
    return as_list(where.op.Scan(*init, *xs, body=graph, num_scan_inputs=len(xs), _outputs=n_out, **directions))


def _zero_iterations(ctx, where, init, y_avals):
    """What a scan of length 0 returns: the initial carries, and each ``ys`` empty along the scan axis."""
    ys = []
    for aval in y_avals:
        zero = ctx.const(np.zeros((), dtype=aval.dtype))
        ys.append(where.op.Expand(zero, ctx.shape_tensor([0, *aval.shape])))
    return [*init, *ys]

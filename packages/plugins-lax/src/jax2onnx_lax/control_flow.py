"""lax ``cond`` → ``If`` (nested for an N-way ``switch``), and the helpers every control-flow
lowering shares.

Branch and body graphs read outer values (operands, closed-over constants) directly, as ONNX allows,
so only loop-carried values become subgraph inputs. Every subgraph input and output is typed from
the JAX avals, which keeps the static shapes JAX knows (a fixed-size loop state stays ``3x3``).
``while`` lives in :mod:`.while_loop`, ``scan`` (and the static-bound ``fori_loop`` JAX turns into
a scan) in :mod:`.scan`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax2onnx.fusion import const_array
from jax2onnx.plugin import Lowerings

lowerings = Lowerings()

#: Aval of the scalar condition a ``Loop`` body returns first.
BOOL_SCALAR = jax.ShapeDtypeStruct((), np.bool_)
#: Aval of the iteration counter a ``Loop`` body receives first.
INT64_SCALAR = jax.ShapeDtypeStruct((), np.int64)


def as_list(outs: Any) -> list[Any]:
    return list(outs) if isinstance(outs, tuple) else [outs]


# ---------------------------------------------------------------------------------------------
# cond


def _branch_graph(ctx: Any, parent: Any, closed: Any, operands: Sequence[Any], name: str) -> Any:
    sub = parent.subgraph(name)  # ``parent`` is ctx or the else branch the If sits in
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
        rest = where.subgraph(f"cond_else_{first}")
        else_g = rest.finish(_if_chain(ctx, rest, index, branches, operands, first + 1), ctx.avals_out)
    pred = where.op.Less(index, first + 1)
    outs = as_list(where.op.If(pred, then_branch=then_g, else_branch=else_g, _outputs=len(ctx.avals_out)))
    for v, aval in zip(outs, ctx.avals_out, strict=True):
        ctx.set_aval(v, aval)
    return outs


@lowerings.register("cond")
def lower_cond(ctx, index, *operands):
    branches = ctx.params["branches"]
    if not ctx.avals_out:
        # Nothing comes out (a branch kept only for an effect, e.g. diffrax's progress-meter
        # callback): nothing to compute, and an If with no outputs is invalid ONNX.
        return []
    if len(branches) == 1:
        return ctx.lower_jaxpr(branches[0], operands)
    literal = const_array(index)
    if literal is not None:  # a literal index (lax.cond(True, ...)): no If needed
        chosen = int(np.clip(int(literal), 0, len(branches) - 1))
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

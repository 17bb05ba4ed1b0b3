"""``jnp.sort`` / ``jnp.argsort`` → TopK over the whole axis; ``argmax``/``argmin`` are lax
primitives (ArgMax/ArgMin from the lax pack), documented and tested here.

TopK with k = the axis size is a full sort. onnxruntime's TopK is stable (equal keys keep their
index order, ascending and descending), which is what ``stable=True`` (JAX's default) promises;
an unstable request declines. NaN ordering is not specified by ONNX, JAX puts NaN last.

Found in the trace with nothing patched (:mod:`._library`): both are jitted; the axis is the body's
``sort`` dimension (None when the body flattens first), ``descending`` a ``rev`` in the body.
"""

from __future__ import annotations

import numpy as np
from jax2onnx.plugin import Lowerings

from ._common import along_axis
from ._library import literal_value, one

lowerings = Lowerings()


def recognize_sort(site):
    """``sort``/``argsort(a, axis, stable, descending)`` from the body's one ``sort``; a bool
    operand, an unstable sort and an ``argsort`` with a ``dtype`` (a conversion) decline."""
    sort = one(site, "sort")
    if sort is None or len(site.operands) != 1 or literal_value(site, 0) is not None:
        return None
    aval = site.avals_in[0]
    if not aval.shape or np.dtype(aval.dtype) == np.bool_ or not sort.params["is_stable"]:
        return None
    if site.eqns("convert_element_type"):
        return None
    first = (site.body.jaxpr if hasattr(site.body, "jaxpr") else site.body).invars[0]
    flattened = len(aval.shape) != 1 and any(e.invars[0] is first for e in site.eqns("reshape"))
    return {"axis": None if flattened else int(sort.params["dimension"]), "stable": True,
            "descending": bool(site.eqns("rev"))}


def _topk(ctx, x):
    """TopK on the input as it is, or None (decline: the lax body sorts in a carrier dtype, or by
    NaN-ness then value) when the target onnxruntime has no exact TopK kernel for its dtype."""
    dtype = np.dtype(ctx.avals_in[0].dtype)
    if dtype not in ctx.kernel_dtypes("TopK") or not ctx.runtime.supports("TopK", dtype, ctx.opset):
        return None
    p = ctx.marked.params
    x, k, axis = along_axis(ctx, x, p["axis"])  # axis=None: sort the flattened array
    return ctx.op.TopK(x, k, axis=axis, largest=int(p["descending"]), sorted=1, _outputs=2)


@lowerings.register_library("jax.numpy.sort", recognize=recognize_sort)
def lower_sort(ctx, x):
    found = _topk(ctx, x)
    return None if found is None else found[0]


@lowerings.register_library("jax.numpy.argsort", recognize=recognize_sort)
def lower_argsort(ctx, x):
    found = _topk(ctx, x)
    return None if found is None else ctx.cast(found[1], ctx.avals_out[0].dtype)

"""``jnp.arange`` → Range when a bound is a symbolic dimension (``jnp.arange(x.shape[0])``);
with static bounds it is a constant, folded at export. ``jnp.linspace`` needs a static ``num`` in
JAX, so it is a constant too (static bounds) or an iota-based computation (traced bounds).

JAX cannot trace ``jnp.arange`` with array-valued (data-dependent) bounds: the result's length
must be known while tracing. The seed's "concrete_input_val" cases therefore pass concrete values.

``jnp.arange`` is plain Python: found in the trace with nothing patched (:mod:`._library`), its
region is an ``iota`` of the symbolic length, times ``step``, plus ``start`` (literals). The length
is all the trace keeps of ``stop``: the recognized ``stop`` is ``start + length * step``, which
gives the same length (the verifying re-trace checks it) and so the same Range.
"""

from __future__ import annotations

import re

import jax
import numpy as np
from jax import export
from jax2onnx.plugin import Lowerings, is_symbolic_dim

from ._library import one

lowerings = Lowerings()


def _literal_operand(eqn, other):
    """The literal operand of a binary ``eqn`` whose other operand is ``other``, as a Python number."""
    if len(eqn.invars) != 2 or other not in eqn.invars:
        return None
    lit = eqn.invars[1 - eqn.invars.index(other)]
    if not hasattr(lit, "val") or np.ndim(lit.val):
        return None
    return np.asarray(lit.val).item()


def recognize_arange(site):
    """``arange(start, stop, step, dtype)`` over a symbolic length: ``add(start, mul(step, iota))``."""
    iota = one(site, "iota")
    if iota is None or site.operands or len(site.avals_out) != 1 or len(iota.params["shape"]) != 1:
        return None
    size = iota.params["shape"][0]
    if not is_symbolic_dim(size):
        return None
    value, step, start = iota.outvars[0], 1, 0
    muls, adds = site.eqns("mul"), site.eqns("add")
    if len(muls) > 1 or len(adds) > 1 or len(site.eqns()) != 1 + len(muls) + len(adds):
        return None
    if muls:
        step = _literal_operand(muls[0], value)
        value = muls[0].outvars[0]
    if adds:
        start = _literal_operand(adds[0], value)
    if step is None or start is None or not step:
        return None
    if not float(step).is_integer() or not float(start).is_integer():
        return None  # a fractional start/step over a symbolic length: left to the body
    step, start = int(step), int(start)
    dtype = np.dtype(iota.params["dtype"])
    return {"start": start, "stop": _simplest_stop(size, start, step, dtype), "step": step, "dtype": dtype}


#: Names in a printed symbolic dimension that are operations, not dimension variables.
_DIM_OPERATIONS = frozenset({"floordiv", "mod", "max", "min", "non_negative"})


def _simplest_stop(size, start, step, dtype):
    """A ``stop`` giving ``arange(start, stop, step)`` the length ``size``: ``a * V + c`` for a
    dimension variable ``V`` of it and small ``a``, ``c`` when one does (the user's ``2 * B``: a
    cheap Range limit), else ``start + size * step`` (always right, costlier to compute)."""
    names = sorted(set(re.findall(r"[A-Za-z_]\w*", str(size))) - _DIM_OPERATIONS)
    scope = getattr(size, "scope", None)
    if len(names) == 1 and scope is not None:
        (var,) = export.symbolic_shape(names[0], scope=scope)
        for a in range(1, 5):
            for c in (0, -1, 1, -2, 2, -3, 3):
                stop = a * var + c
                try:
                    length = jax.eval_shape(lambda s=stop: jax.numpy.arange(start, s, step, dtype=dtype)).shape[0]
                except Exception:  # noqa: BLE001 - not a valid bound
                    continue
                if str(length) == str(size):
                    return stop
    return start + size * step


@lowerings.register_library("jax.numpy.arange", recognize=recognize_arange)
def lower_arange(ctx):
    p = ctx.marked.params
    dtype = ctx.avals_out[0].dtype
    # ONNX Range yields max(ceil((limit - start) / delta), 0) elements, numpy's count.
    return ctx.op.Range(ctx.const(p["start"], dtype), ctx.dim_scalar(p["stop"], dtype), ctx.const(p["step"], dtype))

"""``jnp.pad`` → one Pad with the matching ``mode``.

JAX builds reflect/edge/wrap padding from slices, reversals and concatenations; ONNX Pad has
these modes. Only exact matches are marked: static non-negative widths; ``constant`` with one
static fill value; ``reflect`` with ``reflect_type="even"`` and widths below the (static) axis
size (onnxruntime's limit; JAX reflects repeatedly beyond it); ``edge``; ``wrap``. ``symmetric``,
statistics modes and callables decline to the lax decomposition.

Found in the trace with nothing patched (:mod:`._library`): ``jnp.pad`` calls the jitted
``jax._src.numpy.lax_numpy._pad``. The widths are read back from its body: the ``pad`` primitive's
config (``constant``), else the concatenations that put pieces before and after the array along
each axis; the mode from what the pieces are (reversed slices: ``reflect``; broadcast edges:
``edge``; plain slices: ``wrap``). ``constant_values`` is the jit's literal operand.
"""

from __future__ import annotations

from jax2onnx.plugin import Lowerings

from ._common import is_static_int
from ._library import literal_value

lowerings = Lowerings()


def _constant_widths(site):
    """``((before, after), ...)`` of a body that is one ``pad`` without interior padding."""
    pads = site.eqns("pad")
    if len(pads) != 1 or site.eqns("concatenate"):
        return None
    config = pads[0].params["padding_config"]
    if any(not is_static_int(lo) or not is_static_int(hi) or lo < 0 or hi < 0 or interior for lo, hi, interior in config):
        return None
    return tuple((int(lo), int(hi)) for lo, hi, _ in config)


def _concatenated_widths(site, ndim):
    """Widths from the chain of concatenations around the array: each one along an axis puts
    pieces before and after the value so far."""
    jaxpr = site.body.jaxpr if hasattr(site.body, "jaxpr") else site.body
    current = jaxpr.invars[0]
    widths = [[0, 0] for _ in range(ndim)]
    for e in site.eqns("concatenate"):
        if current not in e.invars:
            continue
        axis = int(e.params["dimension"])
        k = e.invars.index(current)
        sizes = [v.aval.shape[axis] for v in e.invars]
        if not all(is_static_int(s) for i, s in enumerate(sizes) if i != k):
            return None
        widths[axis][0] += sum(int(s) for s in sizes[:k])
        widths[axis][1] += sum(int(s) for s in sizes[k + 1 :])
        current = e.outvars[0]
    if current is not jaxpr.outvars[0]:
        return None
    return tuple((b, a) for b, a in widths)


def recognize_pad(site):
    """``_pad(array, pad_width, mode, constant_values, stat_length, end_values, reflect_type)``."""
    if len(site.operands) != 2 or literal_value(site, 0) is not None or not site.avals_in[0].shape:
        return None
    value = literal_value(site, 1)
    if value is None:
        return None  # a traced fill value
    ndim = len(site.avals_in[0].shape)
    widths = _constant_widths(site)
    if widths is not None:
        mode = "constant"
    else:
        widths = _concatenated_widths(site, ndim)
        if widths is None:
            return None
        mode = "reflect" if site.eqns("rev") else "edge" if site.eqns("broadcast_in_dim") else "wrap"
        if mode == "reflect":  # onnxruntime reflects once: widths below the (static) axis size
            for (before, after), d in zip(widths, site.avals_in[0].shape, strict=True):
                if (before or after) and not (is_static_int(d) and max(before, after) < d):
                    return None
    return {"pad_width": widths, "mode": mode, "constant_values": value, "stat_length": None, "end_values": 0,
            "reflect_type": "even"}


def call_pad(original, arrays, params):
    p = params
    return original(arrays[0], p["pad_width"], p["mode"], p["constant_values"], p["stat_length"], p["end_values"],
                    p["reflect_type"])


@lowerings.register_library("jax._src.numpy.lax_numpy:_pad", recognize=recognize_pad, call=call_pad)
def lower_pad(ctx, x):
    p = ctx.marked.params
    widths = p["pad_width"]
    pads = ctx.i64([b for b, _ in widths] + [a for _, a in widths])
    if p["mode"] == "constant":
        value = ctx.const(p["constant_values"], ctx.avals_out[0].dtype)
        return ctx.op.Pad(x, pads, value, mode="constant")
    return ctx.op.Pad(x, pads, mode=p["mode"])

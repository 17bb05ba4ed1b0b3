"""Reading a library call's static parameters back from its traced region (``recognize`` functions).

Each family module registers its lowerings with ``lowerings.register_library(path, recognize=...)``
(:meth:`jax2onnx.plugin.Lowerings.register_library`): no library attribute is replaced, core finds
the call in the trace (a jitted function's ``jit`` equation, or the equations a plain function's
call emits) and hands ``recognize`` a :class:`jax2onnx.lower.library.LibrarySite`. A recognizer
here is a pure function of that site: it returns the keyword arguments the call must have had, or
None. Core then re-traces the function with them and accepts only an identical jaxpr, so a wrong
guess declines (the body is lowered equation by equation), it never exports something else.

The helpers below are what several recognizers share: the operands' argument names, their literal
values as the caller passed them, and a ``call`` that puts arrays and literals back in their
argument places for the verifying re-trace.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

#: The key of a recognized call's params naming the array operands' arguments, in order.
ARRAYS = "arrays"
#: The key naming every operand's argument in the traced order (literals included): a jit puts
#: positional arguments first, then keyword ones sorted by name, and the re-trace must match it.
OPERANDS = "operands"


def arg_names(site: Any) -> tuple[str, ...] | None:
    """The argument name of each operand of a jitted call (JAX's debug info, e.g. ``("arr",
    "max")`` for ``jnp.clip(x, None, 1.0)``), or None when the trace does not carry them."""
    jaxpr = site.body.jaxpr if hasattr(site.body, "jaxpr") else site.body
    names = getattr(getattr(jaxpr, "debug_info", None), "arg_names", None)
    if names is None or len(names) != len(site.operands):
        return None
    return tuple(names)


def literal_value(site: Any, i: int) -> Any:
    """Operand ``i`` as the caller passed it when it is a literal: a Python scalar when JAX typed it
    weakly (``0.5``), else a numpy scalar of its dtype. None when the operand is an array.

    A weak literal JAX keeps as the Python number the caller wrote (JAX >= 0.8's ``TypedFloat``
    holds ``0.7``, not its float32 rounding) is returned as that number: the verifying re-trace
    passes it back, and its jaxpr prints ``0.7`` only if the call did."""
    value = site.literal(i)
    if value is None:
        return None
    aval = site.avals_in[i]
    if getattr(aval, "weak_type", False) and not isinstance(value, bool):
        for number in (int, float, complex):
            if isinstance(value, number):
                return number(value)
    value = np.asarray(value, dtype=aval.dtype)
    if value.ndim:
        return None
    return value.item() if getattr(aval, "weak_type", False) else value[()]


def split_operands(site: Any, names: Sequence[str]) -> dict[str, Any] | None:
    """``{name: literal value}`` for the literal operands and ``{ARRAYS: (names of the array
    operands)}``: the params of a call whose operands are named ``names``."""
    params: dict[str, Any] = {}
    arrays = []
    for i, name in enumerate(names):
        value = literal_value(site, i)
        if value is None:
            if site.literal(i) is not None:
                return None  # a non-scalar literal
            arrays.append(name)
        else:
            params[name] = value
    params[ARRAYS] = tuple(arrays)
    params[OPERANDS] = tuple(names)
    return params


def call_by_name(original: Callable[..., Any], arrays: Sequence[Any], params: Mapping[str, Any]) -> Any:
    """Call ``original`` with the arrays at the arguments ``params[ARRAYS]`` names and the other
    params as the remaining arguments: the verifying re-trace of a call recognized with
    :func:`split_operands`. The operands that came in the signature's order are passed by position
    (skipped ones at their defaults), the rest by keyword, as the traced call did."""
    values = dict(zip(params[ARRAYS], arrays, strict=True))
    values.update((k, v) for k, v in params.items() if k not in (ARRAYS, OPERANDS))
    signature = list(inspect.signature(original).parameters.values())
    position = {p.name: i for i, p in enumerate(signature)}
    traced = params.get(OPERANDS, tuple(values))
    positional = 0  # how many leading operands came in signature order
    while positional < len(traced) and traced[positional] in position and (
        positional == 0 or position[traced[positional]] > position[traced[positional - 1]]
    ):
        positional += 1
    by_position = set(traced[:positional])
    args: list[Any] = []
    for p in signature:
        if not by_position or p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            break
        if p.name in by_position:
            args.append(values.pop(p.name))
            by_position.discard(p.name)
        elif p.name in values:
            break  # given by keyword in the traced call
        else:
            args.append(p.default)
    return original(*args, **values)


def operand_values(ctx: Any, ins: Sequence[Any], names: Sequence[str], dtypes: Sequence[Any]) -> list[Any]:
    """The graph value of each argument ``names[i]`` cast to ``dtypes[i]``: the call's arrays in
    ``ctx.marked.params[ARRAYS]`` order, a constant for each literal param, None for an absent one."""
    params = ctx.marked.params
    given = dict(zip(params[ARRAYS], ins, strict=True))
    out = []
    for name, dtype in zip(names, dtypes, strict=True):
        if name in given:
            out.append(ctx.cast(given[name], dtype))
        elif params.get(name) is not None:
            out.append(ctx.const(params[name], dtype))
        else:
            out.append(None)
    return out


def one(site: Any, *primitives: str) -> Any | None:
    """The only equation of the region whose primitive is one of ``primitives``, else None."""
    found = site.eqns(*primitives)
    return found[0] if len(found) == 1 else None


def is_float_array(aval: Any) -> bool:
    return np.issubdtype(np.dtype(aval.dtype), np.floating) and len(aval.shape) >= 1


def reduced_axes(site: Any) -> tuple[int, ...] | None:
    """The axes the region's first reduction (``reduce_sum``/``max``/``min``/``prod``) reduces."""
    found = site.eqns("reduce_sum", "reduce_max", "reduce_min", "reduce_prod")
    if not found:
        return None
    return tuple(sorted(int(a) for a in found[0].params["axes"]))

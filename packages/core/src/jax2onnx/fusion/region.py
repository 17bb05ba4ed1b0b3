"""Region side: a layer's call as a marked region with its weights as named operands, and the
region built around ``jax.vmap``s."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..compat import outside_vmap, tracer_trace, vmap_parent, vmap_parts, vmap_size
from ..compat import vmapped as as_per_example
from ..plugin import marked_call

# ---------------------------------------------------------------------------------------------
# Region side


def key_name(k: Any) -> str:
    """One entry of a pytree path as text: a dict key, an attribute name or a sequence index."""
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def path_name(path: Sequence[Any], *, skip: int = 0, drop_trailing: Sequence[str] = ()) -> str:
    """A pytree path as an operand name (``"query/kernel"``): ``skip`` leading entries left out (a
    collection name), trailing entries in ``drop_trailing`` left out (a variable's own ``"value"``)."""
    parts = [key_name(k) for k in path[skip:]]
    while parts and parts[-1] in drop_trailing:
        parts.pop()
    return "/".join(parts)


def call_region(
    mark: str,
    run: Callable[..., Any],
    inputs: Mapping[str, Any],
    weights: Sequence[tuple[str, Any]],
    **static: Any,
) -> Any:
    """Evaluate ``run(weight_arrays, *input_arrays)`` as the marked region ``mark``.

    ``inputs`` are the call's array arguments (name → array), ``weights`` the layer's arrays
    (name → array, in the order ``run`` receives them as a list): both become the region's operands,
    so the region's body is a pure function of them and JAX can batch and differentiate it.
    ``static`` (hashable Python values) reaches the lowering as ``ctx.marked.params``, together with
    ``operands``: the names of all operands, which :class:`Operands` reads back.
    """
    names = tuple(inputs) + tuple(name for name, _ in weights)
    n_in = len(inputs)

    def region(*arrays: Any, **_: Any) -> Any:  # the static params come back as keywords
        return run(list(arrays[n_in:]), *arrays[:n_in])

    return marked_call(mark, region, *inputs.values(), *[v for _, v in weights], operands=names, **static)


def static_bool(x: Any) -> bool | None:
    """``x`` as a Python bool when it is static (Python/numpy bool), else None (a traced flag)."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    return None


# ---------------------------------------------------------------------------------------------
# Regions under ``jax.vmap``


def _vmap_of(xs: Sequence[Any], reads: Sequence[Any]) -> Any | None:
    """The innermost vmap trace ``xs`` belong to, when the call can run outside it: every input
    mapped by one vmap, everything else (unmapped inputs, ``reads``) a value from outside it."""

    trace = None
    for x in xs:
        parts = vmap_parts(x) if x is not None else None
        if parts is None:
            continue
        if trace is None:
            trace = parts[0]
        elif parts[0] is not trace:
            return None
    if trace is None:
        return None
    parent = vmap_parent(trace)
    for a in [*reads, *[x for x in xs if x is not None and vmap_parts(x) is None]]:
        owner = tracer_trace(a)
        if owner is not None and owner is not parent:
            return None
    return trace


def _with_batch_axis(x: Any, size: Any) -> Any:
    """``x`` with the vmap's axis in front (broadcast when the vmap does not map it)."""
    import jax.numpy as jnp


    parts = vmap_parts(x)
    value, axis = (x, None) if parts is None else parts[1:]
    if axis is None:
        return jnp.broadcast_to(value, (size, *jnp.shape(value)))
    return value if axis == 0 else jnp.moveaxis(value, axis, 0)


def call_in_vmaps(build: Callable[..., Any], xs: Sequence[Any], *, reads: Sequence[Any] = ()) -> Any | None:
    """Build a layer's region over the whole batch when the call runs inside ``jax.vmap``.

    Inside ``vmap`` a layer sees per-example values; a region made there only gains the batch axis
    when JAX batches its body afterwards, and core then lowers the body instead of the fused op.
    When ``xs`` are per-example values of ``k`` nested vmaps (and ``reads``, the layer's weights,
    live outside them), ``build(batched_xs, k, vmapped)`` runs outside the vmaps on the inputs with
    the ``k`` batch axes in front (outermost first; a None stays None, one array passed twice
    stays one), and its result is handed back to the vmaps as the per-example value.
    ``vmapped(f)`` is ``jax.vmap`` applied ``k`` times: the region's body is the library's
    per-example code mapped, so a declining lowering still computes exactly what JAX's vmap does.
    Outside vmap (or when ``build`` declines there), ``build(xs, 0, identity)``. Returns ``build``'s
    result, None when it declines.
    """
    import contextlib

    import jax


    with contextlib.ExitStack() as outside:
        traces: list[Any] = []
        batched = list(xs)
        while (trace := _vmap_of(batched, reads)) is not None:
            size = vmap_size(trace)
            outside.enter_context(outside_vmap(trace))
            seen: dict[int, Any] = {}
            for i, x in enumerate(batched):
                if x is not None and id(x) not in seen:
                    seen[id(x)] = _with_batch_axis(x, size)
                batched[i] = None if x is None else seen[id(x)]
            traces.append(trace)
        out = None
        if traces:
            def vmapped(f: Callable[..., Any]) -> Callable[..., Any]:
                for _ in traces:
                    f = jax.vmap(f)
                return f

            out = build(batched, len(traces), vmapped)
    if out is None:
        return build(list(xs), 0, lambda f: f)
    for trace in reversed(traces):  # the outermost vmap's axis is in front
        out = as_per_example(trace, out, 0)
    return out



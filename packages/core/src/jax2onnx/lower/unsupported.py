"""Which primitives of a traced program no installed pack lowers, found in one walk so that a
user fixes them all in one round (:class:`~jax2onnx.errors.UnsupportedPrimitiveError` lists them).

Lowering-side analysis, kept out of ``errors`` so that the errors module imports nothing of core
(it is imported by every stage).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..compat import CUSTOM_JVP_PRIMITIVES, CUSTOM_VJP_PRIMITIVES, INLINE_CALL_PRIMITIVES, JIT_PRIMITIVES, user_location
from ..errors import Unsupported, UnsupportedPrimitiveError, _user_locations
from ..plugin import MARK_PREFIX


def find_unsupported(
    closed_jaxpr: Any,
    lowerings: Mapping[str, Any],
    *,
    handled: Iterable[str] = (),
    location_of: Any = None,
    pack_hint_of: Any = None,
) -> list[Unsupported]:
    """Every primitive of ``closed_jaxpr`` (sub-jaxprs included) without a lowering, in first-use order.

    ``handled``: primitive names the interpreter handles itself (jit, custom_jvp, ...): their bodies
    are scanned instead. A ``jax2onnx:<mark>`` jit whose ``call:<mark>`` lowering exists is trusted to
    be fused and its body skipped. ``location_of(eqn)`` gives the user's ``file:line``;
    ``pack_hint_of(name)`` the pack known to lower a primitive.
    """
    if location_of is None or pack_hint_of is None or not handled:
        location_of = location_of or user_location
        pack_hint_of = pack_hint_of or (lambda name: None)
        handled = handled or (
            JIT_PRIMITIVES | INLINE_CALL_PRIMITIVES | CUSTOM_JVP_PRIMITIVES | CUSTOM_VJP_PRIMITIVES
        )
    handled = frozenset(handled)
    found: dict[str, Unsupported] = {}
    seen_jaxprs: set[int] = set()

    def walk(jaxpr: Any) -> None:
        jaxpr = getattr(jaxpr, "jaxpr", jaxpr)  # ClosedJaxpr -> Jaxpr
        if id(jaxpr) in seen_jaxprs or not hasattr(jaxpr, "eqns"):
            return
        seen_jaxprs.add(id(jaxpr))
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            if name in handled:
                mark = _mark_of(eqn)
                if mark is not None and f"call:{mark}" in lowerings:
                    continue
            elif name not in lowerings:
                where = location_of(eqn)
                entry = found.setdefault(name, Unsupported(name, [], pack_hint_of(name)))
                if where and where not in entry.locations and _user_locations([where]):
                    entry.locations.append(where)
            for sub in _sub_jaxprs(eqn.params):
                walk(sub)

    walk(closed_jaxpr)
    return list(found.values())


def _mark_of(eqn: Any) -> str | None:
    name = str(eqn.params.get("name", ""))
    if not name.startswith(MARK_PREFIX):
        return None
    return name[len(MARK_PREFIX) :].rpartition(":")[0] or None


def _sub_jaxprs(params: Mapping[str, Any]) -> Iterable[Any]:
    # Duck-typed so no JAX internals are needed: a (Closed)Jaxpr has ``eqns`` (or ``jaxpr.eqns``).
    for value in params.values():
        for v in value if isinstance(value, (tuple, list)) else (value,):
            if hasattr(v, "eqns") or hasattr(getattr(v, "jaxpr", None), "eqns"):
                yield v


def all_unsupported(
    closed_jaxpr: Any,
    lowerings: Mapping[str, Any],
    installed: list[str],
    failed: Mapping[str, str] | None = None,
    pack_hint_of: Callable[[str], str | None] | None = None,
) -> UnsupportedPrimitiveError | None:
    """One error listing every unsupported primitive of the program, or None when all are lowered.

    Meant for the converter to call when lowering meets the first unsupported primitive (so a user
    fixes them all in one round), or before lowering. ``pack_hint_of``: the plugin registry's
    ``pack_hint``."""
    items = find_unsupported(closed_jaxpr, lowerings, pack_hint_of=pack_hint_of)
    if not items:
        return None
    return UnsupportedPrimitiveError.from_list(items, installed, failed)

"""Which lowering emitted a node: the interpreter notes it on every node it emits, in ``node.meta``
(onnx_ir's per-object store that is never serialized), so the final validation
(``verification/validate.py``) can name the lowering behind an invalid node."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Sequence
from typing import Any

import onnx_ir as ir

from ..compat import JIT_PRIMITIVES, user_location

#: ``node.meta`` key of the lowering that emitted a node (an :class:`Origin`, set by the interpreter).
ORIGIN = "jax2onnx.origin"


@dataclasses.dataclass(frozen=True)
class Origin:
    """The equation a node was lowered from: its primitive, the pack of the lowering and JAX's
    source info (the user's ``file:line`` is worked out only when an error is reported)."""

    primitive: str
    pack: str
    source_info: Any

    def __str__(self) -> str:
        where = user_location(types.SimpleNamespace(source_info=self.source_info))
        pack = f" from {self.pack}" if self.pack else ""
        return f"the lowering of '{self.primitive}'{pack}{' at ' + where if where else ''}"


def record_origin(nodes: Sequence[ir.Node], eqn: Any, pack: str) -> None:
    """Note on each node just emitted for ``eqn`` which lowering made it (innermost wins: the
    equations of an inlined call record theirs first). The user's line is worked out only if an
    error reports it."""
    if not nodes:
        return
    name = eqn.primitive.name
    if name in JIT_PRIMITIVES and eqn.params.get("name"):  # a fused region: say which
        name = f"{name} {eqn.params['name']}"
    origin = Origin(name, pack, getattr(eqn, "source_info", None))
    for node in nodes:
        node.meta.setdefault(ORIGIN, origin)


__all__ = ["ORIGIN", "Origin", "record_origin"]

"""Running passes by what they declare they need, instead of each starting shape inference or
dead-code removal itself.

A pass (an ``onnx_ir`` pass) may declare, as class attributes:

- ``needs``: a set of :data:`~.manager.SHAPES` (every intermediate value typed and shaped: the
  rules read ranks, axis lengths and head counts, which lowering leaves unset) and
  :data:`~.manager.NO_DEAD_CODE` (no node nobody reads: "read only by" conditions count readers);
- ``produces_dead_code``: when it changed the model, nodes it replaced may be left unread;
- ``keeps_shapes``: the values it writes carry their types and shapes, so the shapes inferred
  before it still hold after it (otherwise a pass that changed the model makes them stale).

:class:`PassPipeline` runs its passes in order and, before each, shape inference when it needs
shapes and none are current, dead-code elimination when it needs none and a pass that produces
dead code changed the model since the last removal. ``dead_code=True``: the model may hold dead
code when the pipeline starts (the lowered graph does); ``finish_dead_code``: remove what is left
at the end.
"""

from __future__ import annotations

from collections.abc import Sequence

import onnx_ir as ir

from ..ir.shapes import infer_intermediate_shapes
from .dead_code import DeadCodeEliminationPass
from .manager import NO_DEAD_CODE, SHAPES


def infer_shapes(model: ir.Model) -> None:
    """onnx's shape inference on the intermediates, lenient: without shapes the rules only find
    fewer matches, never a reason to fail an export."""
    try:
        infer_intermediate_shapes(model)
    except Exception:  # noqa: BLE001 - see the docstring
        pass


class PassPipeline(ir.passes.InPlacePass):
    """Passes in order, with the shape inference and dead-code removal their declarations ask for
    (module doc)."""

    def __init__(self, passes: Sequence[ir.passes.PassBase], *, dead_code: bool = False,
                 finish_dead_code: bool = False) -> None:
        super().__init__()
        self.passes = list(passes)
        self.dead_code_at_start = dead_code
        self.finish_dead_code = finish_dead_code

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        shapes_current = False
        dead_code = self.dead_code_at_start
        modified = False
        for p in self.passes:
            needs = getattr(p, "needs", frozenset())
            if NO_DEAD_CODE in needs and dead_code:
                modified = DeadCodeEliminationPass()(model).modified or modified
                dead_code = False
            if SHAPES in needs and not shapes_current:
                infer_shapes(model)
                shapes_current = True
            result = p(model)
            if result.modified:
                modified = True
                dead_code = dead_code or getattr(p, "produces_dead_code", False)
                shapes_current = shapes_current and getattr(p, "keeps_shapes", False)
        if self.finish_dead_code and dead_code:
            modified = DeadCodeEliminationPass()(model).modified or modified
        return ir.passes.PassResult(model, modified)


__all__ = ["PassPipeline", "infer_shapes"]

"""Graph rewrite rules for packs and front-ends: the public face of core's rule type.

A rule is a pattern, a condition and a replacement (:class:`Rule`): ``match(graph, node)`` returns
what the replacement needs or a :class:`Miss` in words (:func:`no_match`: not the pattern;
:func:`miss`: the pattern with a failed condition), ``replace(graph, node, found)`` writes the
replacement; :mod:`jax2onnx.passes.patterns` writes the chain ``match`` reads as data (:class:`Op`,
:class:`Var`, :class:`Const`, :class:`Scalar`, :class:`OneOf`, :func:`match`: commutative operands,
bound dims, variants). A :class:`RuleFamily` lists rules and is an onnx_ir pass that declares what it needs
(:data:`SHAPES`, :data:`NO_DEAD_CODE`), records its rule on every node it writes
(``jax2onnx:rule``) and counts what fired (``jax2onnx:rewrites``). A front-end hands one to an
export as a pass factory (``ExportOptions.rewrite_passes``); :func:`explain_rewrites` and
``verify(..., explain=True)`` say why a rule did not fire. A pack's family that writes a
runtime's own op registers with :func:`register_rewrite` for every target that runs that op, and
its front-end asks the export's target for it (``target.requested_rewrites([name])``): the pack
never names a target. See ``docs/architecture.md``, "Where a rule goes".
"""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from .ir.constants import constant_tensor
from .passes.manager import NO_DEAD_CODE, SHAPES, is_op, only_reader, replace_value
from .passes.patterns import Const, Match, OneOf, Op, Opt, Pattern, Scalar, Var, match, scalar
from .passes.pipeline import PassPipeline
from .passes.rewrite import explain_rewrites, rewrites_applied
from .passes.rules import (
           REWRITES_KEY,
           RULE_KEY,
           Miss,
           Rule,
           RuleFamily,
           RuleMiss,
           miss,
           no_match,
           node_label,
           value_label,
)
from .precision.low_float import convert_low_float
from .targets.base import register_rewrite


class LowFloatPass(ir.passes.InPlacePass):
    """``precision=``'s float16/bfloat16 plan as an onnx_ir pass for a front-end's rewrite slot, which
    runs after the precision stage: a graph already in another precision (int4 weight matmuls) then
    computes its float work in ``kind`` (the LLM pack's browser ``q4f16`` files). ``runtime``: the
    export target's kernel table (``target.runtime()``)."""

    def __init__(self, kind: str = "float16", keep_io_types: bool = True, runtime: Any = None) -> None:
        super().__init__()
        self.kind, self.keep_io_types, self.runtime = kind, keep_io_types, runtime

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        convert_low_float(model, self.kind, self.keep_io_types, self.runtime)
        return ir.passes.PassResult(model, modified=True)


__all__ = ["NO_DEAD_CODE", "REWRITES_KEY", "RULE_KEY", "SHAPES", "Const", "LowFloatPass", "Match", "Miss", "OneOf", "Op", "Opt", "PassPipeline",
           "Pattern", "Rule", "RuleFamily", "RuleMiss", "Scalar", "Var", "constant_tensor", "explain_rewrites", "is_op",
           "match", "miss", "no_match", "node_label", "only_reader", "register_rewrite", "replace_value", "rewrites_applied",
           "scalar", "value_label"]

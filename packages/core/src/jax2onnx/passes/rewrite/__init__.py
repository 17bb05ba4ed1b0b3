"""The pattern-rewrite stage: rules that recognise what a library computed, however it wrote it,
and put the compact (or a runtime's fused) form in its place.

One module per rule family (a :class:`~jax2onnx.passes.rules.RuleFamily`: rules that are each a
pattern, a condition and a replacement, :mod:`jax2onnx.passes.rules`); :class:`RewritePass` runs the
common families and those the target lists (:attr:`jax2onnx.targets.Target.rewrites`) as one
:class:`~jax2onnx.passes.pipeline.PassPipeline`, which infers shapes once before the first and
removes dead code between two families where the first changed the model (their declared needs).
It records how often each rule fired (``model.metadata_props["jax2onnx:rewrites"]``, a JSON
object, shown by the export report with the target, ``"jax2onnx:target"``); every node a rule
writes names it (``node.metadata_props["jax2onnx:rule"]``), and :func:`explain_rewrites` says why
a rule did not fire where its pattern was. Each family names the op types its rules start from
(``start_ops``); a model holding none of them skips the stage's shape inference and rules
(:func:`could_fire`).

Families:
- :mod:`.elementwise`: functions of one value (exact/tanh GELU, normal CDF, erfc, SiLU, sigmoid),
  recognised by evaluating the subgraph, not by its spelling.
- :mod:`.broadcast`: elementwise ops on constants expanded to a runtime (batch) shape are computed
  on the constants and expanded once (a symbolic batch's masks fold as a static batch's do).
- :mod:`.layer_norm`: LayerNorm written by hand (centred or moments form) → LayerNormalization
  (opset 17); before :mod:`.norms`, whose RMS chain is a centred LayerNorm's tail.
- :mod:`.norms`: RMSNorm written by hand → RMSNormalization (opset 23).
- :mod:`.bias_add`: MatMul + bias on matrices → Gemm.
- :mod:`.matmul_broadcast`: Transpose(Einsum) that is numpy's batch-broadcasting matmul → MatMul.
- :mod:`.rotary`: rotary embeddings (half-split or interleaved, whole or partial) →
  ``RotaryEmbedding`` (opset 23); before :mod:`.attention`, whose 3-D form then reads its output.
- :mod:`.attention`: scaled dot-product attention however written (einsum or MatMul, scale,
  additive or ``where`` mask, GQA repeats) → ``Attention`` (opset 23).
- :mod:`.layout`: layout Transposes sunk through elementwise ops, then cancelled in pairs (the
  channels-last activations a value's two readers kept apart, e.g. squeeze-and-excitation).

A target's own families live in its folder (``jax2onnx/targets/<name>/rewrites.py``) and run after
these (``Target.rewrites``).
"""

from __future__ import annotations

import json
from typing import Any

import onnx_ir as ir

from ..manager import all_graphs
from ..pipeline import PassPipeline, infer_shapes
from ..rules import REWRITES_KEY, RuleFamily, RuleMiss, explain, read_counts, write_counts
from .attention import Attentions
from .bias_add import BiasAddChains
from .broadcast import BroadcastConstants
from .elementwise import ElementwiseFunctions
from .layer_norm import LayerNorms
from .layout import SinkTransposes
from .matmul_broadcast import BroadcastMatmuls
from .norms import RmsNorms
from .rotary import RotaryEmbeddings

TARGET_KEY = "jax2onnx:target"


def model_opset(model: ir.Model) -> int:
    return int(model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1)))


#: The families every target runs, in order (a target adds its own after them); each is built
#: for the model's opset.
COMMON_FAMILIES = (BroadcastConstants, ElementwiseFunctions, LayerNorms, RmsNorms, RotaryEmbeddings, Attentions,
                   BiasAddChains, BroadcastMatmuls, SinkTransposes)


def common_families(opset: int) -> list[RuleFamily]:
    """The families every target runs, in order (a target adds its own after them)."""
    return [family(opset) for family in COMMON_FAMILIES]


class RewritePass(ir.passes.InPlacePass):
    """Run the common rule families and those of ``target`` (a :class:`jax2onnx.targets.Target`;
    None: the common ones alone) on a model and add their counts to its ``jax2onnx:rewrites``
    metadata; the target's name goes to ``jax2onnx:target``."""

    #: what it leaves for the pass pipeline it runs in: the nodes its rules replaced
    produces_dead_code = True

    def __init__(self, target: Any = None) -> None:
        super().__init__()
        self.target = target

    def families(self, opset: int) -> list[RuleFamily]:
        return families_for(self.target, opset)

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        modified = False
        families = self.families(model_opset(model))
        if could_fire(model, families):
            # each family declares what it needs (shapes, no dead readers): the pipeline provides it
            modified = PassPipeline(families)(model).modified
        write_counts(model, read_counts(model))
        if self.target is not None:
            model.metadata_props[TARGET_KEY] = self.target.name
        return ir.passes.PassResult(model, modified)


def families_for(target: Any, opset: int) -> list[RuleFamily]:
    """The rewrite stage's families for ``target`` (a :class:`jax2onnx.targets.Target`, or None:
    the common ones alone) at ``opset``."""
    common = common_families(opset)
    return common if target is None else target.rewrite_families(opset, common)


def explain_rewrites(model: Any, target: Any = None) -> list[RuleMiss]:
    """Why the rewrite rules for ``target`` (a :class:`jax2onnx.targets.Target`; None: the common
    rules) did not fire on ``model`` (an ``onnx.ModelProto`` or ``onnx_ir.Model``, usually an
    exported one): per rule whose pattern was found but a condition failed, the first such node and
    the condition, in words. Changes nothing: the rules read a copy, with its shapes inferred as
    the stage does."""
    model = ir.serde.deserialize_model(model if not isinstance(model, ir.Model) else ir.to_proto(model))
    infer_shapes(model)
    return explain(model, families_for(target, model_opset(model)))


def could_fire(model: ir.Model, families: list) -> bool:
    """Whether any rule of ``families`` may match: one of the op types some family starts from
    (its ``start_ops``) occurs in the main graph, a subgraph or a function body. Without one, the
    stage's shape inference (a round trip of the whole model through onnx's C++ inference) and
    every rule are skipped; a family only writes ops when one of its own start ops is there, so
    what a family writes for another one to start from cannot appear either."""
    wanted = frozenset().union(*(family.start_ops for family in families))
    return any(node.op_type in wanted for graph in all_graphs(model) for node in graph)


def rewrites_applied(model) -> dict[str, int]:
    """The rule counts recorded on an exported model (``onnx.ModelProto`` or ``onnx_ir.Model``)."""
    if isinstance(model, ir.Model):
        return json.loads(model.metadata_props.get(REWRITES_KEY, "{}"))
    for prop in model.metadata_props:
        if prop.key == REWRITES_KEY:
            return json.loads(prop.value)
    return {}


__all__ = ["COMMON_FAMILIES", "REWRITES_KEY", "TARGET_KEY", "RewritePass", "could_fire", "explain_rewrites",
           "families_for", "rewrites_applied"]

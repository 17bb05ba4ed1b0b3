"""Dead code: onnx_ir's reachability-based removal of unused nodes, functions and opsets.

Rules (as onnx_ir implements them):
- a node is dead when none of its outputs is an output of its graph or read by any node, in any
  graph (a control-flow body reading an outer value counts as a reader); each graph is walked from
  its end, so a chain of dead nodes goes in one sweep;
- an initializer nothing reads and that is not a graph input or output is dropped;
- a function no node calls is dropped, and so is an opset import no node uses.
"""

from __future__ import annotations

import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedFunctionsPass, RemoveUnusedNodesPass, RemoveUnusedOpsetsPass


class DeadCodeEliminationPass(ir.passes.Sequential):
    def __init__(self) -> None:
        super().__init__(RemoveUnusedNodesPass(), RemoveUnusedFunctionsPass(), RemoveUnusedOpsetsPass())

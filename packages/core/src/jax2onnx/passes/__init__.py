"""Graph passes on the ``onnx_ir`` model. Each keeps outputs identical and reports a change."""

from __future__ import annotations

from .constant_folding import ConstantFoldingPass
from .dead_code import DeadCodeEliminationPass
from .manager import PassManager, PassResult


def default_passes() -> PassManager:
    """Dead code first (less to fold), then folding, then dead code again for what folding freed."""
    return PassManager([DeadCodeEliminationPass(), ConstantFoldingPass(), DeadCodeEliminationPass()])


__all__ = ["ConstantFoldingPass", "DeadCodeEliminationPass", "PassManager", "PassResult", "default_passes"]

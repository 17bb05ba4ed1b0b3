"""Graph passes on the ``onnx_ir`` model. Each keeps outputs identical and reports a change."""

from __future__ import annotations

from .common_subexpressions import CommonSubexpressionEliminationPass
from .constant_folding import ConstantFoldingPass
from .dead_code import DeadCodeEliminationPass
from .identity_elimination import IdentityEliminationPass
from .manager import PassManager, PassResult
from .transpose_cancel import TransposeCancelPass


def default_passes() -> PassManager:
    """Dead code first (less to fold), then folding; then renames and duplicates go, and dead code
    once more for what the others freed."""
    return PassManager(
        [
            DeadCodeEliminationPass(),
            ConstantFoldingPass(),
            IdentityEliminationPass(),
            TransposeCancelPass(),
            CommonSubexpressionEliminationPass(),
            DeadCodeEliminationPass(),
        ]
    )


__all__ = [
    "CommonSubexpressionEliminationPass",
    "ConstantFoldingPass",
    "DeadCodeEliminationPass",
    "IdentityEliminationPass",
    "PassManager",
    "PassResult",
    "TransposeCancelPass",
    "default_passes",
]

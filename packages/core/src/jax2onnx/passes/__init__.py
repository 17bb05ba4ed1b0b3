"""Graph passes on the ``onnx_ir`` model, on onnx_ir's pass framework: each is an
``onnx_ir.passes.InPlacePass`` that keeps outputs identical and reports whether it changed the model."""

from __future__ import annotations

from typing import Any

import onnx_ir as ir

from .cast_cancel import CastCancelPass
from .common_subexpressions import CommonSubexpressionEliminationPass
from .constant_folding import ConstantFoldingPass
from .dead_code import DeadCodeEliminationPass
from .identity_elimination import IdentityEliminationPass
from .kernel_coverage import KernelCoveragePass
from .manager import NONDETERMINISTIC_OPS, all_graphs
from .rewrite import RewritePass
from .roll_split import RollSplitPass
from .squeeze_cancel import SqueezeCancelPass
from .transpose_cancel import TransposeCancelPass


def default_passes(target: Any = None) -> ir.passes.PassManager:
    """Dead code first (less to fold), then folding; then renames and duplicates go, and dead code
    once more for what the others freed. Rolls read one Split per value and axis after duplicates are
    merged (each distinct roll counts once). Casts around (op, dtype) pairs onnxruntime lacks come last,
    so the other passes see the graph as the lowerings wrote it. The rewrite stage (the common rules and
``target``'s, a :class:`jax2onnx.targets.Target`; None: the common ones, :mod:`.rewrite`) runs on the
folded, deduplicated graph, and dead code removes what it replaced."""
    return ir.passes.PassManager(
        [
            DeadCodeEliminationPass(),
            ConstantFoldingPass(),
            IdentityEliminationPass(),
            TransposeCancelPass(),
            SqueezeCancelPass(),
            CommonSubexpressionEliminationPass(),
            RewritePass(target),
            DeadCodeEliminationPass(),
            RollSplitPass(),
            KernelCoveragePass(),
            DeadCodeEliminationPass(),
        ]
    )


__all__ = [
    "CastCancelPass",
    "CommonSubexpressionEliminationPass",
    "ConstantFoldingPass",
    "DeadCodeEliminationPass",
    "IdentityEliminationPass",
    "KernelCoveragePass",
    "NONDETERMINISTIC_OPS",
    "RewritePass",
    "RollSplitPass",
    "SqueezeCancelPass",
    "TransposeCancelPass",
    "all_graphs",
    "default_passes",
]

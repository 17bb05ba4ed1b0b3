"""Graph passes on the ``onnx_ir`` model, on onnx_ir's pass framework: each is an
``onnx_ir.passes.InPlacePass`` that keeps outputs identical and reports whether it changed the model,
and declares what it needs (shapes inferred, no dead code) and leaves (dead code), which the
:class:`~.pipeline.PassPipeline` provides and removes; rewrite rules are data (:mod:`.rules`)."""

from __future__ import annotations

from typing import Any

from .cast_cancel import CastCancelPass
from .common_subexpressions import CommonSubexpressionEliminationPass
from .constant_folding import ConstantFoldingPass
from .dead_code import DeadCodeEliminationPass
from .identity_elimination import IdentityEliminationPass
from .kernel_coverage import KernelCoveragePass
from .manager import NO_DEAD_CODE, NONDETERMINISTIC_OPS, SHAPES, all_graphs
from .max_pool_guard import MaxPoolGuardLayoutPass
from .nan_guard_hoist import NanGuardHoistPass
from .pipeline import PassPipeline
from .reshape_cancel import ReshapeCancelPass
from .rewrite import RewritePass
from .roll_split import RollSplitPass
from .squeeze_cancel import SqueezeCancelPass
from .transpose_cancel import TransposeCancelPass


def default_passes(target: Any) -> PassPipeline:
    """Folding first, on the lowered graph without its dead code (folding declares it needs none:
    less to fold); then renames, Reshapes that undo each other and duplicates go. The rewrite stage (the common rules and
    ``target``'s, a :class:`jax2onnx.targets.Target`, :mod:`.rewrite`) runs on the folded,
    deduplicated graph. A max pool's NaN guard moves past the layout Transposes that stayed
    (:mod:`.max_pool_guard`). Rolls read one Split per value and axis after duplicates are
    merged and what the others freed is gone (each distinct roll counts once; it needs no dead code).
    Casts around (op, dtype) pairs the target's kernel table lacks (``target.runtime()``) come last,
    so the other passes see the graph as the lowerings wrote it; dead code goes at the end. Shape
    inference and dead-code removal run where a pass declares it needs them (:mod:`.pipeline`), not
    in the passes."""
    return PassPipeline(
        [
            ConstantFoldingPass(),
            IdentityEliminationPass(),
            TransposeCancelPass(),
            MaxPoolGuardLayoutPass(),
            SqueezeCancelPass(),
            ReshapeCancelPass(),
            CommonSubexpressionEliminationPass(),
            RewritePass(target),
            RollSplitPass(),
            KernelCoveragePass(target.runtime()),
        ],
        dead_code=True,  # the lowered graph holds nodes nothing reads
        finish_dead_code=True,
    )


__all__ = [
    "NO_DEAD_CODE",
    "SHAPES",
    "CastCancelPass",
    "PassPipeline",
    "CommonSubexpressionEliminationPass",
    "ConstantFoldingPass",
    "DeadCodeEliminationPass",
    "IdentityEliminationPass",
    "KernelCoveragePass",
    "MaxPoolGuardLayoutPass",
    "NanGuardHoistPass",
    "NONDETERMINISTIC_OPS",
    "ReshapeCancelPass",
    "RewritePass",
    "RollSplitPass",
    "SqueezeCancelPass",
    "TransposeCancelPass",
    "all_graphs",
    "default_passes",
]

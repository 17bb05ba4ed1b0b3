"""``target="qdq"``: the NPU form, static QDQ (Qualcomm QNN, Intel and AMD NPUs' compilers).

Everything the target owns is in this folder: the precision it implies and checks
(:mod:`.precision`: ``Precision("qdq", activations=, weights=, calibration=, dims=)``), the
rewrite into QDQ (:mod:`.transform`), the calibration (:mod:`.calibrate`) and the check of a
finished graph (:mod:`.checks`: findings fail the export and ``jax2onnx check --target qdq``; notes
explain each op left float). Standard ONNX only; a ``precision=`` left at float32 becomes
``Precision("qdq")`` (uint16 activations, int8 weights, calibrated on the probe set).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from ...errors import TargetUnsupportedError
from ...precision.options import Precision, PrecisionForm, parse_precision, register_precision_form
from ..base import Target, register_target
from . import checks
from .precision import checked_qdq, describe
from .transform import quantize_qdq

#: the lowest opset per form: per-channel QDQ from 13; uint16 activations and int4 weights are opset 21's
_OPSET_FLOORS = {"uint16": 21, "int4": 21}


@dataclasses.dataclass(frozen=True)
class QdqTarget(Target):
    """A target whose only precision is its own QDQ form."""

    def fit_precision(self, precision: Any, opset: int) -> Any:
        if precision.kind == "float32":
            precision = parse_precision(Precision("qdq"))
        elif precision.kind != "qdq":
            raise TargetUnsupportedError(
                f"target='qdq' ({self.summary}) writes its own static QDQ form; precision={precision.kind!r} is "
                "another: use Precision('qdq', activations=..., weights=...) or export with target='onnx'")
        for form in (precision.activations, precision.weights):
            floor = _OPSET_FLOORS.get(form, 13)
            if opset < floor:
                raise TargetUnsupportedError(f"Precision('qdq') with {form} needs opset {floor} (its QuantizeLinear/"
                                             f"DequantizeLinear types), got opset={opset}: raise the opset")
        return precision

    def notes(self, model: Any) -> list[str]:
        return checks.notes(model)


register_precision_form(PrecisionForm(
    kind="qdq", check=checked_qdq, apply=lambda model, p: quantize_qdq(model, p).describe(), describe=describe))
QDQ = register_target(QdqTarget(
    name="qdq",
    summary="NPUs (QNN, Intel, AMD): static shapes, every compute op between DequantizeLinear and QuantizeLinear",
    precision_forms={"qdq": "QDQ"},
    check_graph=checks.findings,
))

__all__ = ["QDQ", "QdqTarget"]

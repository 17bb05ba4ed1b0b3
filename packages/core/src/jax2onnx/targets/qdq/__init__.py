"""``target="qdq"``: the NPU form, static QDQ (the graphs Qualcomm's QNN, Intel's and AMD's NPU
compilers read as integer kernels).

The folder is the whole backend: its precision form (:class:`QdqForm`, a precision kind of its
own: ``Precision("qdq", activations=, weights=, calibration=, dims=)``, checked by
:mod:`.precision`), the rewrite into QDQ (:mod:`.transform`, calibrated by the precision stage's
runner :mod:`jax2onnx.precision.ranges`), and the check of a finished graph (:mod:`.checks`:
findings fail the export and ``jax2onnx check --target qdq``; notes explain each op left float).
Standard ONNX only; kernel table and verification: onnxruntime's CPU provider (the reference the
graph is checked on; no NPU runs here). A ``precision=`` left at float32 becomes ``Precision("qdq")``
(uint16 activations, int8 weights, calibrated on the probe set).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from ...errors import TargetUnsupportedError
from ..base import Target, register_target
from ..precision_forms import PrecisionForm
from . import checks
from .precision import checked_qdq, describe
from .transform import quantize_qdq

#: the lowest opset per form: per-channel QDQ from 13; uint16 activations and int4 weights are opset 21's
_OPSET_FLOORS = {"uint16": 21, "int4": 21}


class QdqForm(PrecisionForm):
    """Static QDQ: every compute op between DequantizeLinear and QuantizeLinear, calibrated."""

    kind: ClassVar[str] = "qdq"
    min_opset: ClassVar[int] = 13
    about: ClassVar[str] = "static QDQ, calibrated activation scales, per-channel or blocked weights"
    own_stage: ClassVar[bool] = True

    def check(self, precision: Any, enable_double_precision: bool) -> Any:
        return checked_qdq(precision, enable_double_precision)

    def apply(self, model: Any, precision: Any, ranges: Any) -> str:
        return quantize_qdq(model, precision, ranges).describe()

    def describe(self, precision: Any) -> str:
        return describe(precision)


@dataclasses.dataclass(frozen=True)
class QdqTarget(Target):
    """A target whose only precision is its own QDQ form."""

    def fit_precision(self, precision: Any, opset: int) -> Any:
        form = self.precision_form("qdq")
        if precision.kind == "float32":
            precision = form.check(dataclasses.replace(precision, kind="qdq"), False)
        elif precision.kind != form.kind:
            raise TargetUnsupportedError(
                f"target={self.name!r} ({self.summary}) writes its own static QDQ form; precision={precision.kind!r} "
                "is another: use Precision('qdq', activations=..., weights=...) or export with target='onnx'")
        for what in (precision.activations, precision.weights):
            floor = _OPSET_FLOORS.get(what, form.min_opset)
            if opset < floor:
                raise TargetUnsupportedError(f"Precision('qdq') with {what} needs opset {floor} (its QuantizeLinear/"
                                             f"DequantizeLinear types), got opset={opset}: raise the opset")
        return precision

    def notes(self, model: Any) -> list[str]:
        return checks.notes(model)


QDQ = register_target(QdqTarget(
    name="qdq",
    summary="NPUs (QNN, Intel, AMD): static shapes, every compute op between DequantizeLinear and QuantizeLinear",
    precision_forms=(QdqForm(),),
    check_graph=checks.findings,
    # static-llm: an LLM front-end writes static prefill and decode graphs sharing their weights (NPU
    # compilers take static shapes only); not "genai": onnxruntime-genai 0.18 does not run them on CPU
    capabilities=frozenset({"static-llm"}),
))

__all__ = ["QDQ", "QdqForm", "QdqTarget"]

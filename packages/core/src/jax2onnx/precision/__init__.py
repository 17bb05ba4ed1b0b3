"""The precision stage: ``to_onnx(..., precision=...)`` after the graph passes, before saving.

``float32`` leaves the graph as traced. ``float16``/``bfloat16`` rewrite the float32 work of the
main graph into the 16-bit type (:mod:`.low_float`); ``int8``/``int4`` replace weight matmuls by
quantized ones (:mod:`.quantize`). Both keep streamed weights (:class:`~jax2onnx.Weights`) lazy:
each tensor is converted when it is written. Cast pairs the rewrite makes exact are cancelled
(:class:`jax2onnx.passes.CastCancelPass`) and dead code goes.

What was done is recorded in the model's metadata (``jax2onnx.precision``,
``jax2onnx.precision.detail``): :func:`jax2onnx.verify` reads it to judge the outputs by the
precision's cosine floor instead of float32 tolerances, and reports bytes by dtype.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import onnx_ir as ir

from ..passes import CastCancelPass, PassPipeline
from ..targets.base import default_target
from . import accuracy_levels
from .calibration import measuring_on
from .low_float import convert_low_float
from .options import KINDS, Precision, PrecisionError, parse_precision, stage_forms
from .quantize import quantize_weight_matmuls
from .ranges import tensor_ranges

#: metadata_props keys of an exported model
META_KIND = "jax2onnx.precision"
META_DETAIL = "jax2onnx.precision.detail"
#: written as "dynamic" where int8 matmuls quantize their activations at run time (its own cosine floor)
META_ACTIVATIONS = "jax2onnx.precision.activations"


@dataclasses.dataclass
class PrecisionResult:
    precision: Precision
    detail: str


def apply_precision(model: ir.Model, precision: Precision, target: Any = None) -> PrecisionResult:
    """Rewrite ``model`` in place for ``precision`` (fitted to ``target``, a
    :class:`jax2onnx.targets.Target`; None: the default target) and record it in the metadata. The
    float16/bfloat16 plan reads the target's kernel table; the int8/int4 matmuls are written by the
    forms the fitted precision names (:mod:`jax2onnx.targets.precision_forms`).

    The plan reads every value's dtype: run shape inference first (``to_onnx`` does), since a few
    outputs (an ``If``'s) are typed only by it."""
    if precision.kind == "float32":
        return PrecisionResult(precision, "float32")
    target = target or default_target()
    with measuring_on(target):  # calibration, accuracy levels and QDQ ranges run on the target's providers
        detail = _rewrite(model, precision, target)
    model.metadata_props[META_KIND] = precision.kind
    model.metadata_props[META_DETAIL] = f"{precision.describe()}: {detail}"
    if precision.activations is not None:
        model.metadata_props[META_ACTIVATIONS] = precision.activations
    return PrecisionResult(precision, detail)


def _rewrite(model: ir.Model, precision: Precision, target: Any) -> str:
    """The rewrite of ``model`` for ``precision`` on ``target``; returns what was done, one line."""
    levels_on = None
    if precision.kind in ("float16", "bfloat16"):
        detail = convert_low_float(model, precision.kind, precision.keep_io_types, target.runtime()).describe()
    elif precision.kind in (own := {form.kind: form for form in stage_forms()}):  # a target folder's own kind
        detail = own[precision.kind].apply(model, precision, tensor_ranges)
    else:
        # accuracy_level="auto": the data each MatMulNBits is checked on, drawn before the tables are quantized
        levels_on = accuracy_levels.plan(model, precision)
        detail = quantize_weight_matmuls(model, precision).describe()
    # the rewrite left the nodes it replaced unread: the pipeline removes them after the casts cancel
    PassPipeline([CastCancelPass()], dead_code=True, finish_dead_code=True)(model)
    if levels_on is not None:
        detail = f"{detail}; {levels_on.choose(model).describe()}"
    return detail


__all__ = ["KINDS", "META_ACTIVATIONS", "META_DETAIL", "META_KIND", "Precision", "PrecisionError", "PrecisionResult", "apply_precision",
           "parse_precision"]

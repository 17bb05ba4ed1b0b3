"""``target="tensorrt"``: what TensorRT 10's ONNX parser takes (opset <= its ceiling, no float64,
no DFT, static Loop trip counts...): the export fails with one line naming the op and TensorRT.
The folder holds the backend: the op table as data (``tensorrt_ops.json``), the lint (:mod:`.lint`),
the exact rewrites into types it lists (:mod:`.rewrites`). No int8/int4 form: the
dynamic-quantization ops are not in its table (TensorRT quantizes through its own calibration);
float16 and bfloat16 as everywhere. Kernel table and verification: the installed onnxruntime's CPU
provider (the reference every export is checked on; TensorRT itself is not run here)."""

from __future__ import annotations

from typing import Any

from ...compat import sub_jaxprs, user_location
from ...errors import TargetUnsupportedError
from ..base import Target, register_target
from ..precision_forms import FLOAT_FORMS
from .lint import check_tensorrt, tensorrt_table
from .rewrites import TensorRtForms


def _opsets() -> tuple[int, int]:
    table = tensorrt_table()
    return table["opset_min"], table["opset_max"]


def _check_trace(closed: Any) -> None:
    """Before lowering: what TensorRT cannot run, named with the user's line (the first found)."""
    trt = f"TensorRT {tensorrt_table()['tensorrt']}"
    stack = [(closed.jaxpr, None)]
    while stack:
        jaxpr, outer = stack.pop()
        for eqn in jaxpr.eqns:
            # inside a library's jit (jnp.fft.rfft) the user's line is the call's, outside
            where = user_location(eqn) or outer
            at = f" at {where}" if where else ""
            if eqn.primitive.name == "fft":
                raise TargetUnsupportedError(f"target='tensorrt': {eqn.primitive.name}{at} lowers to DFT, which "
                                             f"{trt}'s ONNX parser does not support")
            for v in eqn.outvars:
                dtype = getattr(getattr(v, "aval", None), "dtype", None)
                if dtype is not None and str(dtype) in ("float64", "complex128"):
                    raise TargetUnsupportedError(
                        f"target='tensorrt': {eqn.primitive.name}{at} computes {dtype}, which {trt} has no kernels "
                        "for (its parser casts DOUBLE down); export without enable_double_precision")
            stack.extend((sub.jaxpr, where) for sub in sub_jaxprs(eqn))


def _check_graph(model: Any) -> list[str]:
    return [str(finding) for finding in check_tensorrt(model)]


TENSORRT = register_target(Target(
    name="tensorrt",
    summary=f"TensorRT {tensorrt_table()['tensorrt']}'s ONNX parser",
    opsets=_opsets,
    rewrites=(TensorRtForms,),
    precision_forms=FLOAT_FORMS,
    check_trace=_check_trace,
    check_graph=_check_graph,
))

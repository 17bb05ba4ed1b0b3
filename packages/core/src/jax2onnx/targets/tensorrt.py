"""``target="tensorrt"``: what TensorRT 10's ONNX parser takes (opset <= its ceiling, no float64,
no DFT, static Loop trip counts...): the export fails with one line naming the op and TensorRT.
The op table is data (``jax2onnx/ir/tensorrt_ops.json``); the lint is
:mod:`jax2onnx.passes.rewrite.tensorrt`, the exact rewrites into types it lists
:mod:`jax2onnx.passes.rewrite.tensorrt_forms`. No int8/int4 form: the dynamic-quantization ops are
not in its table (TensorRT quantizes through its own calibration)."""

from __future__ import annotations

from typing import Any

from ..compat import sub_jaxprs, user_location
from ..errors import TargetUnsupportedError
from ..passes.rewrite.tensorrt import check_tensorrt, tensorrt_table
from ..passes.rewrite.tensorrt_forms import TensorRtForms
from .base import Target, register_target


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
    check_trace=_check_trace,
    check_graph=_check_graph,
))

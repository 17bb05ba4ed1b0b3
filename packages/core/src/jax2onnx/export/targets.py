"""``to_onnx(..., target=...)``: which runtime the graph is tuned for.

- ``"generic"`` (default): standard ONNX, the rewrite stage's compact forms;
- ``"onnxruntime"``: also onnxruntime's contrib ops (com.microsoft) where they measured faster;
- ``"tensorrt"``: what TensorRT 10's ONNX parser takes (opset <= its ceiling, no float64, no DFT,
  static Loop trip counts...): the export fails with one line naming the op and TensorRT;
- ``"web"``: what ``export_mode="web"`` does (one self-contained file), the generic graph.
"""

from __future__ import annotations

from typing import Any

from .. import compat
from ..errors import InputSpecError, TargetUnsupportedError
from ..passes.rewrite.tensorrt import check_tensorrt, tensorrt_table

TARGETS = ("generic", "onnxruntime", "tensorrt", "web")


def resolve_target(target: Any, export_mode: str, opset: int) -> tuple[str, str, int]:
    """(target, export_mode, opset) after checking they agree: ``export_mode="web"`` means
    ``target="web"``; ``"tensorrt"`` exports at most at TensorRT's opset ceiling."""
    if target not in TARGETS:
        raise InputSpecError(f"target must be one of {', '.join(repr(t) for t in TARGETS)}, got {target!r}")
    if export_mode == "web":
        if target not in ("generic", "web"):
            raise InputSpecError(f"export_mode='web' is target='web'; it cannot be combined with target={target!r}")
        target = "web"
    if target == "web":
        export_mode = "web"
    if target == "tensorrt":

        table = tensorrt_table()
        if opset < table["opset_min"]:
            raise InputSpecError(f"target='tensorrt': TensorRT {table['tensorrt']} parses opsets "
                                 f"{table['opset_min']}-{table['opset_max']}, got opset={opset}")
        opset = min(opset, table["opset_max"])
    return target, export_mode, opset


def check_jaxpr(closed: Any, target: str) -> None:
    """Before lowering: what ``target`` cannot run, named with the user's line (the first found)."""
    if target != "tensorrt":
        return

    trt = f"TensorRT {tensorrt_table()['tensorrt']}"
    stack = [(closed.jaxpr, None)]
    while stack:
        jaxpr, outer = stack.pop()
        for eqn in jaxpr.eqns:
            # inside a library's jit (jnp.fft.rfft) the user's line is the call's, outside
            where = compat.user_location(eqn) or outer
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
            stack.extend((sub.jaxpr, where) for sub in compat.sub_jaxprs(eqn))


def check_model(model: Any, target: str) -> None:
    """After the passes: the graph's ops within the target's set."""
    if target != "tensorrt":
        return

    findings = check_tensorrt(model)
    if findings:
        first = findings[0]
        more = f" (and {len(findings) - 1} more: jax2onnx check --target tensorrt lists them)" if len(findings) > 1 else ""
        raise TargetUnsupportedError(f"target='tensorrt': {first}{more}")


__all__ = ["TARGETS", "TargetUnsupportedError", "check_jaxpr", "check_model", "resolve_target"]

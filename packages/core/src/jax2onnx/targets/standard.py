"""``target="onnx"`` (the default; ``"generic"`` is its older name): standard ONNX only, the
rewrite stage's compact forms, runs on any ONNX runtime."""

from __future__ import annotations

from .base import Target, register_target

STANDARD = register_target(Target(
    name="onnx",
    summary="standard ONNX only, for any runtime",
    aliases=("generic",),
    precision_forms={"int8": "DequantizeLinear", "int8 dynamic": "MatMulInteger", "int4": "DequantizeLinear"},
))

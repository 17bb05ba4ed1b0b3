"""``target="web"``: onnxruntime-web (wasm) in a browser or Node: one self-contained file
(``export_mode="web"``), the standard graph."""

from __future__ import annotations

from .base import Target, register_target

WEB = register_target(Target(
    name="web",
    summary="onnxruntime-web: one self-contained file, standard ONNX",
    export_mode="web",
    precision_forms={"int8": "DequantizeLinear", "int8 dynamic": "MatMulInteger", "int4": "DequantizeLinear"},
))

"""``target="web"``: onnxruntime-web (wasm) in a browser or Node: one self-contained file
(``export_mode="web"``), the standard graph.

Kernel table: onnxruntime-web's wasm backend is onnxruntime's CPU provider compiled to wasm, so it
reads the installed onnxruntime's table (:mod:`jax2onnx.ir.runtime`). Verification: the CPU
provider, and onnxruntime-web itself under Node.js through :mod:`.runner`
(``allclose_onnxruntime_web``). Precision: the standard forms. An encoder's model as the folder a
transformers.js pipeline loads: :func:`.folder.write_pipeline_folder`."""

from __future__ import annotations

from ...ir.runtime import installed
from ..base import Target, register_target
from ..precision_forms import STANDARD_FORMS
from .folder import ARCHITECTURES, write_pipeline_folder

WEB = register_target(Target(
    name="web",
    summary="onnxruntime-web: one self-contained file, standard ONNX",
    export_mode="web",
    precision_forms=STANDARD_FORMS,
    # onnxruntime-web's wasm backend is the CPU provider compiled to wasm: the matching onnxruntime's table
    kernel_table=installed,
    # the LLM pack writes a folder transformers.js loads (onnxruntime-web underneath) for it
    capabilities=frozenset({"transformers.js"}),
))

__all__ = ["ARCHITECTURES", "WEB", "write_pipeline_folder"]

"""``target="web"``: onnxruntime-web (wasm) in a browser or Node: one self-contained file
(``export_mode="web"``), the standard graph plus the two com.microsoft ops of onnxruntime's 4-bit
form (``ops``: :data:`WEB_CONTRIB_OPS`), not the whole contrib domain.

Kernel table: onnxruntime-web's wasm backend is onnxruntime's CPU provider compiled to wasm, so it
reads the installed onnxruntime's table (:mod:`jax2onnx.ir.runtime`). Verification: the CPU
provider, and onnxruntime-web itself under Node.js through :mod:`.runner`
(``allclose_onnxruntime_web``). Precision: the standard forms, with int4 as ``MatMulNBits`` (what
transformers.js' own q4 files hold) and its 4-bit embedding tables as ``GatherBlockQuantized``;
``Precision("int4", int4_kernel="DequantizeLinear")`` keeps standard ONNX. An encoder's model as the
folder a transformers.js pipeline loads: :func:`.folder.write_pipeline_folder`."""

from __future__ import annotations

from ...ir.runtime import installed
from ..base import Target, register_target
from ..precision_forms import (
    FLOAT_FORMS,
    MS_DOMAIN,
    Int4DequantizeLinear,
    Int4MatMulNBits,
    Int8DequantizeLinear,
    Int8MatMulInteger,
)
from .folder import ARCHITECTURES, write_pipeline_folder

#: The contrib ops onnxruntime-web's wasm build runs that the web target's graphs may hold: the
#: 4-bit matmul (float32 and float16 activations and scales; its float32 path at every accuracy
#: level: level 4 gives level 1's numbers there) and the 4-bit table gather (float32 and float16
#: scales), each run in onnxruntime-web 1.30 under Node (packages/plugins-llm/tests/test_web_llm.py
#: runs the int4 decoder there). The rest of com.microsoft is not allowed: the wasm build carries
#: only some of the CPU contrib kernels, and WebGPU fewer.
WEB_CONTRIB_OPS = frozenset({(MS_DOMAIN, "MatMulNBits"), (MS_DOMAIN, "GatherBlockQuantized")})

WEB = register_target(Target(
    name="web",
    summary="onnxruntime-web: one self-contained file, standard ONNX plus the 4-bit MatMulNBits",
    export_mode="web",
    ops=WEB_CONTRIB_OPS,
    precision_forms=(*FLOAT_FORMS, Int8DequantizeLinear(), Int8MatMulInteger(), Int4MatMulNBits(),
                     Int4DequantizeLinear()),
    # onnxruntime-web's wasm backend is the CPU provider compiled to wasm: the matching onnxruntime's table
    kernel_table=installed,
    # the LLM pack writes a folder transformers.js loads (onnxruntime-web underneath) for it
    capabilities=frozenset({"transformers.js"}),
))

__all__ = ["ARCHITECTURES", "WEB", "WEB_CONTRIB_OPS", "write_pipeline_folder"]

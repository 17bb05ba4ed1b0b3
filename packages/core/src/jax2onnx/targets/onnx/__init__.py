"""``target="onnx"`` (the default; ``"generic"`` is its older name): standard ONNX only, the
rewrite stage's compact forms, runs on any ONNX runtime.

Kernel table: the ONNX spec's (op, dtype) pairs, less those the reference runtime has no kernel
for (the installed onnxruntime's CPU provider, :mod:`jax2onnx.ir.runtime`, which intersects its
measured table with the schemas): a standard model must run where it is verified. Verification:
onnxruntime's CPU provider. Precision: the standard forms (DequantizeLinear, MatMulInteger, blocked
int4 DequantizeLinear from opset 21)."""

from __future__ import annotations

from ...ir.runtime import installed
from ..base import DEFAULT_TARGET, Target, register_target
from ..precision_forms import STANDARD_FORMS

STANDARD = register_target(Target(
    name=DEFAULT_TARGET,
    summary="standard ONNX only, for any runtime",
    aliases=("generic",),
    precision_forms=STANDARD_FORMS,
    # the spec's (op, dtype) pairs (Runtime.dtypes reads the schemas) less those the reference runtime lacks
    kernel_table=installed,
    capabilities=frozenset({"genai"}),
))

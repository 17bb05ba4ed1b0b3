"""What front-ends build on: a model family's exporter (an LLM folder writer, say), a
pack's tools, a power user's script. Packs import core through this module, ``jax2onnx`` itself,
``jax2onnx.plugin`` / ``fusion`` / ``testing`` / ``targets`` / ``compat`` / ``dtypes`` / ``ir`` and the
CLI's extension point (``jax2onnx.cli``), never a stage's internals (``jax2onnx.export``, ``lower``,
``passes``, ``precision``, ``verification``): tests/test_layout_rules.py enforces it.

- the staged export: :class:`ExportProgram`, :func:`export_program` (trace, lower, optimize with the
  rewrite slot's passes, write, verify);
- weight sources for streamed exports (:class:`jax2onnx.Weights`): :func:`as_source` (a
  ``.safetensors`` file, an Orbax checkpoint folder, a mapping, a callable), :func:`leaf_name`,
  :func:`source_problems` (what a source that lists its tensors lacks or holds otherwise);
- running and comparing: :func:`compare`, :func:`run_onnx`;
- files written whole, as ``to_onnx`` writes them (a front-end's own folder, say): temp names
  carrying their owning process (:func:`claim_temp_token`), whether a temp entry's owner is gone
  (:func:`is_abandoned`), :func:`remove_entry`, one writer at a time in a folder
  (:func:`folder_lock`), and the clear error of a full disk (:func:`disk_full_error`);
- the JAX reference's precision (:data:`HIGHEST`, :func:`precision_scope`) and an LM's greedy-token
  check (:class:`GreedyAgreement`, :data:`MIN_AGREEMENT`, :data:`NEW_TOKENS`);
- :data:`PRECISION_KINDS` (the names ``precision=`` takes), :func:`parse_precision` (a ``precision=``
  value checked as ``to_onnx`` checks it, before a front-end's long work), :func:`summarize` (a written
  model's ops, sizes and parameters, as the report's first section), :func:`check_opset` (an ``opset=`` in the
  range the installed ``onnx`` exports, checked before a front-end's long work) and
  :data:`FUNCTION_DOMAIN` (the domain of ``@onnx_function`` bodies).
"""

from __future__ import annotations

from .export.options import check_opset
from .export.program import ExportProgram, export_program
from .export.saving import claim_temp_token, disk_full_error, folder_lock, is_abandoned, remove_entry
from .export.weights import as_source, leaf_name, source_problems
from .lower.functions import FUNCTION_DOMAIN
from .precision.options import KINDS as PRECISION_KINDS
from .precision.options import parse_precision
from .verification.compare import compare, run_onnx
from .verification.greedy import MIN_AGREEMENT, NEW_TOKENS, GreedyAgreement
from .verification.reference import HIGHEST, precision_scope
from .verification.report import summarize

__all__ = [
    "FUNCTION_DOMAIN",
    "HIGHEST",
    "MIN_AGREEMENT",
    "NEW_TOKENS",
    "PRECISION_KINDS",
    "ExportProgram",
    "GreedyAgreement",
    "as_source",
    "check_opset",
    "claim_temp_token",
    "compare",
    "disk_full_error",
    "export_program",
    "folder_lock",
    "is_abandoned",
    "leaf_name",
    "parse_precision",
    "precision_scope",
    "remove_entry",
    "run_onnx",
    "source_problems",
    "summarize",
]

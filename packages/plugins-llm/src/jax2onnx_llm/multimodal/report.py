"""A multimodal folder's precisions (``precision=``, one for all graphs or one per graph) and its
report: per graph its precision, its size on disk (graph and external data) and the fused ops it
holds, written into the folder's description file (``multimodal.json``'s ``models``) and read by
:func:`folder_report`."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Mapping
from typing import Any

from jax2onnx import PrecisionError
from jax2onnx.frontend import parse_precision, summarize

from ..errors import OptionError

#: the description file's key for the report
REPORT_KEY = "models"
#: default-domain ops that stand for a fused pattern (the other domains' ops are all fused kernels:
#: com.microsoft's MatMulNBits, GroupQueryAttention, SimplifiedLayerNormalization, ...)
FUSED_STANDARD_OPS = frozenset({"Attention", "RotaryEmbedding", "RMSNormalization", "LayerNormalization",
                                "MatMulInteger", "DynamicQuantizeLinear"})


def check_precisions(precision: Any, graphs: Mapping[str, str]) -> dict[str, Any]:
    """``precision=`` as one precision per graph (``graphs``: the folder's sections), each checked
    by core (:func:`jax2onnx.frontend.parse_precision`) before any export runs."""
    if isinstance(precision, Mapping):
        unknown = sorted(set(precision) - set(graphs))
        if unknown:
            raise OptionError(f"precision= names {unknown}, which this folder has not; name some of {sorted(graphs)} "
                              "(a graph not named stays float32)")
        chosen = {name: precision.get(name, "float32") for name in graphs}
    else:
        chosen = {name: precision for name in graphs}
    for name, value in chosen.items():
        try:
            parse_precision(value)
        except PrecisionError as exc:
            raise OptionError(f"precision for the {name} graph: {exc}") from exc
    return chosen


def submodel_report(path: pathlib.Path, precision: Any) -> dict[str, Any]:
    """One graph's entry: file name, precision, bytes on disk (with its external data) and fused ops."""
    summary = summarize(path)
    fused = {op: count for op, count in summary.op_histogram.items()
             if ("." in op and not op.startswith("ai.onnx.")) or op in FUSED_STANDARD_OPS}
    return {"file": path.name, "precision": getattr(precision, "kind", precision),
            "bytes": int((summary.file_bytes or 0) + (summary.external_data_bytes or 0)),
            "parameter_bytes": int(summary.parameter_bytes), "fused_ops": fused}


def folder_report(folder: str | pathlib.Path, description_file: str) -> dict[str, dict[str, Any]]:
    """The report an export wrote into the folder's description file: ``{graph: entry}``."""
    return json.loads((pathlib.Path(folder) / description_file).read_text())[REPORT_KEY]

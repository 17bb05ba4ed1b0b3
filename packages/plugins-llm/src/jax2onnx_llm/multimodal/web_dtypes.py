"""``precision=`` for a multimodal browser folder: per sub-model the dtypes to write, each one file
under the name transformers.js loads for it (``onnx/<session><suffix>.onnx``: ``vision_encoder_fp16``,
``decoder_model_merged_q4``, ...; the suffixes of :mod:`jax2onnx_llm.web.dtypes`), and the report
of what was written.

``precision=`` is the genai layout's: one value for every sub-model, or one per sub-model under the
genai folder's section names (``{"vision": "float16", "decoder": "int4"}``; Whisper: ``encoder``,
``decoder``), a sub-model not named staying float32. Each value is one of the text folder's dtypes
(``float32``, ``float16``, ``int8``, ``int4``, ``q4f16`` or a ``jax2onnx.Precision``) or a tuple of them,
one file each, so that one folder holds, say, both ``decoder_model_merged.onnx`` and its ``_q4``
twin and a page picks per session (``from_pretrained(folder, {dtype: {decoder_model_merged: "q4"}})``).
Every file's inputs and outputs stay float32, so any mix of dtypes chains.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

from jax2onnx import ExportProgram
from jax2onnx.rewrite import LowFloatPass
from jax2onnx.targets import get_target
from jax2onnx.targets.web.folder import ONNX_FOLDER, Int64InputsPass

from ..errors import OptionError
from ..web.dtypes import WebDtype, web_dtypes
from ..web.limits import FILE_LIMIT
from ..web.write import save as save_model
from .report import submodel_report


def web_precisions(precision: Any, sections: Mapping[str, str]) -> dict[str, list[WebDtype]]:
    """``precision=`` as the dtypes to write per section (``sections``: the genai folder's, whose names
    ``precision=`` uses), checked before any export runs."""
    if isinstance(precision, Mapping):
        unknown = sorted(set(precision) - set(sections))
        if unknown:
            raise OptionError(f"precision= names {unknown}, which this folder has not; name some of {sorted(sections)} "
                              "(a sub-model not named stays float32)")
        return {name: web_dtypes(precision.get(name, "float32")) for name in sections}
    chosen = web_dtypes(precision)
    return {name: chosen for name in sections}


def write_graph(fn: Any, inputs: list[Any], folder: pathlib.Path, name: str, in_names: list[str],
                out_names: list[str], *, dtypes: list[WebDtype], int64_inputs: tuple[str, ...], target: str,
                opset: int) -> dict[str, dict[str, Any]]:
    """One sub-model as ``onnx/<name><suffix>.onnx`` per dtype, by core's stages for ``target`` (the
    dtype's precision; ``q4f16``: then its float work in float16, inputs and outputs kept float32);
    ``int64_inputs`` (traced int32) are made int64, as transformers.js feeds them. Returns each file's
    report entry (session, dtype, bytes, fused ops, external-data chunks) by file stem."""
    entries = {}
    for dtype in dtypes:
        passes: list[Any] = []
        if dtype.float16_after:
            passes.append(lambda options: LowFloatPass("float16", True, get_target(target).runtime()))
        passes.append(lambda options: Int64InputsPass(int64_inputs, options.input_names))
        program = ExportProgram(fn, inputs, model_name=name, opset=opset, input_names=in_names,
                                output_names=out_names, return_mode="ir", target=target, precision=dtype.precision,
                                rewrite_passes=passes)
        model = program.optimize().model
        path = folder / ONNX_FOLDER / f"{name}{dtype.suffix}.onnx"
        chunks = save_model(model, path, FILE_LIMIT)
        entries[path.stem] = {**submodel_report(path, dtype.name), "file": f"{ONNX_FOLDER}/{path.name}",
                              "session": name, "dtype": dtype.transformers_js, "external_data_chunks": chunks}
    return entries


def transformers_js_config(files: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``config.json``'s ``transformers.js_config``: per session the dtype loaded when a page names
    none (the first written), and the files whose weights are chunked."""
    default: dict[str, str] = {}
    for entry in files.values():
        default.setdefault(entry["session"], entry["dtype"])
    chunked = {entry["file"].rsplit("/", 1)[-1]: entry["external_data_chunks"] for entry in files.values()
               if entry["external_data_chunks"]}
    return {"dtype": default, **({"use_external_data_format": chunked} if chunked else {})}

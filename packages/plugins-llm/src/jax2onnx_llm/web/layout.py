"""The folder transformers.js loads a causal LM from (``from_pretrained(folder, {dtype})``)::

    config.json                model_type, sizes, transformers.js_config (hf_config.py)
    generation_config.json     the special tokens, greedy decoding
    tokenizer.json             + tokenizer_config.json (the pack's tokenizer writer)
    onnx/model.onnx            one file per dtype (dtypes.py), external data chunks beside
    onnx/model_q4.onnx ...
    jax2onnx_web.json          what was written and the browser limits report (limits.py)

Each dtype is one export through core's stages (``ExportProgram``, the ``web`` target's op list and
precision forms) of the graph in graph.py; the folder is staged and swapped in whole by the caller.
"""

from __future__ import annotations

import pathlib
import warnings
from typing import Any

from jax2onnx import ExportProgram
from jax2onnx.rewrite import LowFloatPass
from jax2onnx.targets import get_target
from jax2onnx.targets.web.folder import (
    CONFIG_FILE,
    ONNX_FOLDER,
    REPORT_FILE,
    write_default_tokenizer_config,
    write_json,
)

from ..norm_fusion import RmsNormFusionPass
from ..spec import DecoderSpec
from ..tokenizers import write as write_tokenizer
from .dtypes import WebDtype
from .graph import Int64IdsPass, io_names, web_input_specs, web_step
from .hf_config import GENERATION_CONFIG_FILE, build_config, build_generation_config
from .limits import FILE_LIMIT, binding_report, check_memory
from .write import save as save_model


def write_web_folder(spec: DecoderSpec, folder: pathlib.Path, *, dtypes: list[WebDtype], max_length: int,
                     target: str, opset: int, tok_source: Any, reporter: Any) -> None:
    """Every file of the layout into ``folder`` (a staging folder)."""
    sizes = check_memory(spec, dtypes)  # before minutes of export
    (folder / ONNX_FOLDER).mkdir()
    chunks: dict[str, int] = {}
    files: dict[str, Any] = {}
    for dtype in dtypes:
        reporter.stage(f"{ONNX_FOLDER}/{dtype.filename}")
        model = export_model(spec, dtype, max_length=max_length, target=target, opset=opset)
        report = binding_report(model, max_length)
        count = save_model(model, folder / ONNX_FOLDER / dtype.filename, FILE_LIMIT)  # read here: tests lower it
        if count:
            chunks[dtype.filename] = count
        files[dtype.filename] = {"dtype": dtype.transformers_js, "precision": dtype.name, "external_data_chunks": count,
                                 "estimated_weight_bytes": int(sizes[dtype.name]), **report}
        if report["over_webgpu_default_binding"]:
            warnings.warn(f"onnx/{dtype.filename}: the largest {' and '.join(report['over_webgpu_default_binding'])} "
                          f"exceed WebGPU's default binding size (128 MiB); on WebGPU the page must request a larger "
                          "maxStorageBufferBindingSize (wasm is not limited)", stacklevel=4)
    transformers_js: dict[str, Any] = {"dtype": dtypes[0].transformers_js}
    if chunks:
        transformers_js["use_external_data_format"] = chunks
    write_json(folder / CONFIG_FILE, build_config(spec, max_length=max_length, transformers_js=transformers_js))
    write_json(folder / GENERATION_CONFIG_FILE, build_generation_config(spec))
    if tok_source is not None:
        reporter.stage("tokenizer")
        write_tokenizer_files(tok_source, folder, max_positions=spec.max_positions)
    write_json(folder / REPORT_FILE, {"max_length": max_length, "target": target, "files": files})


def export_model(spec: DecoderSpec, dtype: WebDtype, *, max_length: int, target: str, opset: int) -> Any:
    """One dtype's graph (an ``onnx_ir.Model``) through core's stages for ``target``."""
    resolved = get_target(target)
    in_names, out_names = io_names(spec.num_layers)
    passes = [*resolved.requested_rewrites([RmsNormFusionPass.name])]
    if dtype.float16_after:
        passes.append(lambda options: LowFloatPass("float16", True, resolved.runtime()))
    passes.append(lambda options: Int64IdsPass())
    program = ExportProgram(web_step(spec, max_length), web_input_specs(spec, max_length), model_name="causal_lm",
                            opset=opset, input_names=in_names, output_names=out_names, return_mode="ir",
                            precision=dtype.precision, target=target, rewrite_passes=passes)
    return program.optimize().model


def write_tokenizer_files(source: Any, folder: pathlib.Path, *, max_positions: int | None) -> None:
    """The pack's tokenizer files (``tokenizers.write``: every source the pack reads), plus the minimal
    ``tokenizer_config.json`` transformers.js' ``AutoTokenizer`` needs where the source has none (a
    converted KerasHub tokenizer), as core's folder writer adds it."""
    write_tokenizer(source, folder)
    write_default_tokenizer_config(folder, max_positions=max_positions)

"""``export_causal_lm(..., target="qdq")``: a static NPU LLM (a target declaring ``"static-llm"``).

An NPU compiler (Qualcomm's QNN, Intel's, AMD's) takes static shapes only, so the decoder is written
as two graphs of one step (:mod:`.window`): the **prefill** graph ``prefill.onnx`` (``P`` tokens at
a time, ``P`` = :data:`PREFILL_LENGTH`, clipped to ``max_length // 2``) and
the **decode** graph ``decode.onnx`` (one token), over a fixed ``max_length`` cache. Both are the
target's static QDQ form (``Precision("qdq", ...)``: every matmul between ``DequantizeLinear`` and
``QuantizeLinear``, calibrated), except the LM head, left float as NPU deployments leave it (its
node carries the QDQ form's ``KEEP_FLOAT`` mark; the embedding is a ``Gather``, float too). The
weights are stored once: ``model.onnx.data`` holds each large tensor a single time and both graphs
point into it (:mod:`.layout`). ``genai_config.json`` names the two as onnxruntime-genai's
decoder pipeline with a sliding window (:mod:`.layout`).

Calibration (:mod:`.probe`): ``Precision("qdq", calibration=[...])`` with token-id arrays or texts,
run as prompts through the JAX step, each graph calibrated on the inputs it sees while they
generate; without it, the *probe set*: :data:`.probe.PROBE_PROMPTS` prompts of random tokens (seed
0), each generating :data:`.probe.PROBE_TOKENS` tokens.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
from typing import Any

from jax2onnx import ExportProgram, Precision
from jax2onnx.targets.qdq.transform import KEEP_FLOAT

from ..errors import MaxLengthError, OptionError
from ..spec import DecoderSpec
from .layout import CONFIG_FILE, DECODE_FILE, PREFILL_FILE, genai_config, write_shared
from .probe import calibration_batches
from .window import window_specs, window_step

#: what a target declares when its LLMs are static prefill and decode graphs (``Target.can``)
STATIC_LLM = "static-llm"
#: the prefill graph's window when the export names none (clipped to ``max_length // 2``)
PREFILL_LENGTH = 64
#: why the LM head stays float (the QDQ check's note)
HEAD_REASON = "the LM head, which NPU deployments run in float (its logits pick the tokens)"


def prefill_window(max_length: int) -> int:
    """``P``: the prefill graph's tokens per run, :data:`PREFILL_LENGTH` clipped to ``max_length // 2``
    (onnxruntime-genai's sliding window needs a context of at least two windows, and windows over one token)."""
    if max_length < 4:
        raise MaxLengthError(f"max_length={max_length}: target='qdq' writes a prefill window of at least 2 tokens and "
                             "a context of at least two windows; pass max_length >= 4")
    return min(PREFILL_LENGTH, max_length // 2)


def checked_precision(precision: Any) -> Precision:
    """``precision=`` for a static export: float32 (the default: ``Precision("qdq")``) or a
    ``Precision("qdq", ...)``."""
    if precision in ("float32", None):
        return Precision("qdq")
    if isinstance(precision, str) and precision == "qdq":
        return Precision("qdq")
    if isinstance(precision, Precision) and precision.kind == "qdq":
        return precision
    raise OptionError(f"precision={precision!r}: target='qdq' writes its own static QDQ form; use "
                      "Precision('qdq', activations=..., weights=..., calibration=...) or leave precision out")


def write_static_folder(spec: DecoderSpec, folder: pathlib.Path, *, max_length: int, precision: Any, target: str,
                        opset: int, tokenizer: Any, search: dict[str, Any] | None) -> dict[str, Any]:
    """``prefill.onnx``, ``decode.onnx``, ``model.onnx.data`` and ``genai_config.json`` into ``folder``;
    returns the config."""
    precision = checked_precision(precision)
    window = prefill_window(max_length)
    batches = calibration_batches(spec, precision.calibration, tokenizer, window=window, max_length=max_length)
    protos = {}
    for name, w in ((PREFILL_FILE, window), (DECODE_FILE, 1)):
        calibrated = dataclasses.replace(precision, calibration=batches[w])
        protos[name] = _export_window(spec, w, max_length, calibrated, target, opset)
    write_shared(protos, folder)
    config = genai_config(spec, max_length=max_length, window=window, search=search)
    (folder / CONFIG_FILE).write_text(json.dumps(config, indent=4) + "\n")
    return config


def _export_window(spec: DecoderSpec, window: int, max_length: int, precision: Precision, target: str,
                   opset: int) -> Any:
    from ..export import io_names

    inputs, outputs = io_names(spec.num_layers)
    program = ExportProgram(window_step(spec), window_specs(spec, window, max_length), model_name="causal_lm",
                            opset=opset, input_names=inputs, output_names=outputs, precision=precision, target=target)
    program.lower()
    _mark_head(program.model)
    return program.model_proto


def _mark_head(model: Any) -> None:
    """The matmul computing the logits (first output), found through ops that only move data, keeps float."""
    value = model.graph.outputs[0]
    while (node := value.producer()) is not None:
        if node.op_type in ("MatMul", "Gemm"):
            node.metadata_props[KEEP_FLOAT] = HEAD_REASON
            return
        if node.op_type not in ("Reshape", "Cast", "Identity", "Squeeze", "Unsqueeze", "Transpose", "Add"):
            break
        value = node.inputs[0]
    raise OptionError("target='qdq' leaves the LM head float and found no matmul computing the logits (the "
                      "step's first output); export this model with target='onnx'")


__all__ = ["PREFILL_LENGTH", "STATIC_LLM", "checked_precision", "prefill_window", "write_static_folder"]

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
from jax2onnx.targets import get_target
from jax2onnx.targets.qdq.transform import KEEP_FLOAT

from ..errors import MaxLengthError, OptionError
from ..spec import DecoderSpec
from .layout import CONFIG_FILE, DECODE_FILE, PREFILL_FILE, genai_config, io_names, write_shared
from .probe import METADATA_KEY, calibration_batches
from .window import window_specs, window_step

#: what a target declares when its LLMs are static prefill and decode graphs (``Target.can``)
STATIC_LLM = "static-llm"
#: the prefill graph's window when the export names none (clipped to ``max_length // 2``)
PREFILL_LENGTH = 64
#: why the LM head stays float (the QDQ check's note)
HEAD_REASON = "the LM head, which NPU deployments run in float (its logits pick the tokens)"


def prefill_window(max_length: int, target: str = "this target") -> int:
    """``P``: the prefill graph's tokens per run, :data:`PREFILL_LENGTH` clipped to ``max_length // 2``
    (onnxruntime-genai's sliding window needs a context of at least two windows, and windows over one token)."""
    if max_length < 4:
        raise MaxLengthError(f"max_length={max_length}: target={target!r} writes a prefill window of at least 2 tokens and "
                             "a context of at least two windows; pass max_length >= 4")
    return min(PREFILL_LENGTH, max_length // 2)


def checked_precision(precision: Any, target: str) -> Precision:
    """``precision=`` for a static export: the target's own calibrated form (``Precision("qdq", ...)``
    for ``"qdq"``), or float32 (the default), which becomes that form with its defaults. Its
    calibration batches are filled in per graph (:mod:`.probe`)."""
    kinds = [f.kind for f in get_target(target).precision_forms if f.own_stage]
    if not kinds:
        raise OptionError(f"target={target!r} declares static LLM graphs but no calibrated precision form of its own")
    kind = kinds[0]
    if precision is None or (isinstance(precision, str) and precision in ("float32", kind)):
        return Precision(kind)
    if isinstance(precision, Precision) and precision.kind in ("float32", kind):
        return dataclasses.replace(precision, kind=kind)
    raise OptionError(f"precision={precision!r}: target={target!r} writes its own static form; use "
                      f"Precision({kind!r}, ...) (activations=, weights=, calibration=) or leave precision out")


def write_static_folder(spec: DecoderSpec, folder: pathlib.Path, *, max_length: int, precision: Any, target: str,
                        opset: int, tokenizer: Any, search: dict[str, Any] | None) -> dict[str, Any]:
    """``prefill.onnx``, ``decode.onnx``, ``model.onnx.data`` and ``genai_config.json`` into ``folder``;
    returns the config."""
    precision = checked_precision(precision, target)
    window = prefill_window(max_length, target)
    batches, data = calibration_batches(spec, precision.calibration, tokenizer, window=window, max_length=max_length)
    protos = {}
    for name, w in ((PREFILL_FILE, window), (DECODE_FILE, 1)):
        calibrated = dataclasses.replace(precision, calibration=batches[w])
        protos[name] = _export_window(spec, w, max_length, calibrated, target, opset)
        entry = protos[name].metadata_props.add()
        entry.key, entry.value = METADATA_KEY, f"{len(batches[w])} batches from {data}"
    write_shared(protos, folder)
    config = genai_config(spec, max_length=max_length, window=window, search=search)
    (folder / CONFIG_FILE).write_text(json.dumps(config, indent=4) + "\n")
    return config


def _export_window(spec: DecoderSpec, window: int, max_length: int, precision: Precision, target: str,
                   opset: int) -> Any:
    inputs, outputs = io_names(spec.num_layers)
    program = ExportProgram(window_step(spec), window_specs(spec, window, max_length), model_name="causal_lm",
                            opset=opset, input_names=inputs, output_names=outputs, precision=precision, target=target)
    program.lower()
    _mark_head(program.model, target)
    return program.model_proto


def _mark_head(model: Any, target: str) -> None:
    """The matmul computing the logits (first output), found through ops that only move data, keeps float."""
    value = model.graph.outputs[0]
    while (node := value.producer()) is not None:
        if node.op_type in ("MatMul", "Gemm"):
            node.metadata_props[KEEP_FLOAT] = HEAD_REASON
            return
        if node.op_type not in ("Reshape", "Cast", "Identity", "Squeeze", "Unsqueeze", "Transpose", "Add"):
            break
        value = node.inputs[0]
    raise OptionError(f"target={target!r} leaves the LM head float and found no matmul computing the logits (the "
                      "step's first output); export this model for a target running dynamic shapes")


__all__ = ["PREFILL_LENGTH", "STATIC_LLM", "checked_precision", "prefill_window", "write_static_folder"]

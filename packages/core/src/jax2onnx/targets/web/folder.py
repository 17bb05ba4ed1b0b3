"""A model as a transformers.js folder (npm ``@huggingface/transformers``): what its ``pipeline(task,
folder)`` loads for an encoder exported with ``to_onnx(..., target="web")``::

    config.json               model_type (the Hugging Face architecture whose I/O the graph has), sizes
    tokenizer.json            + tokenizer_config.json, for a text model
    preprocessor_config.json  for an image model (how an image becomes pixel_values)
    onnx/model.onnx           the graph, int64 ids (transformers.js feeds int64)
    jax2onnx_web.json         marks the folder as a jax2onnx export (only such a folder is replaced)

transformers.js picks the model class by ``model_type`` and feeds the graph by input name, so a graph
is written under an architecture only when its inputs and outputs are that architecture's
(:data:`ARCHITECTURES`); the LLM pack's causal-LM folder shares the JSON, tokenizer and int64 pieces.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import onnx
import onnx_ir as ir

from ...errors import InputSpecError

CONFIG_FILE = "config.json"
PREPROCESSOR_FILE = "preprocessor_config.json"
ONNX_FOLDER = "onnx"
#: the marker of a folder jax2onnx wrote for the browser
REPORT_FILE = "jax2onnx_web.json"
#: a tokenizer folder's files transformers.js reads (copied when present; tokenizer.json required)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
#: the key transformers.js reads its own options from (default dtype, external data chunks)
TRANSFORMERS_JS_KEY = "transformers.js_config"


@dataclass(frozen=True)
class Architecture:
    """A Hugging Face architecture as transformers.js runs it in a pipeline: the graph's inputs
    (``required`` first, then those it feeds when the graph has them) and outputs it reads."""

    model_type: str
    class_name: str
    pipeline: str
    required: tuple[str, ...]
    optional: tuple[str, ...]
    outputs: tuple[str, ...]
    #: inputs transformers.js feeds as int64 (a graph traced with int32 reads them through a Cast)
    int64_inputs: tuple[str, ...] = ()
    needs_tokenizer: bool = False
    #: an image model: its ``preprocessor_config.json`` (resize, rescale, normalize) makes ``pixel_values``
    needs_preprocessor: bool = False


ARCHITECTURES = {
    "bert": Architecture("bert", "BertModel", "feature-extraction", required=("input_ids", "attention_mask"),
                         optional=("token_type_ids",), outputs=("last_hidden_state",),
                         int64_inputs=("input_ids", "attention_mask", "token_type_ids"), needs_tokenizer=True),
    # pixel_values: float32 (batch, channels, height, width), as the image processor makes them
    "vit": Architecture("vit", "ViTForImageClassification", "image-classification", required=("pixel_values",),
                        optional=(), outputs=("logits",), needs_preprocessor=True),
}


def write_pipeline_folder(model: onnx.ModelProto | ir.Model, folder: str | os.PathLike[str], *, model_type: str,
                          tokenizer: Any = None, config: Mapping[str, Any] | None = None,
                          preprocessor: Any = None) -> pathlib.Path:
    """Write ``model`` (what ``to_onnx(..., target="web")`` returned) as the transformers.js folder of
    ``model_type`` (see :data:`ARCHITECTURES`; ``"bert"``: ``pipeline("feature-extraction", folder)``,
    ``"vit"``: ``pipeline("image-classification", folder)``).

    ``tokenizer``: a ``transformers`` fast tokenizer, a ``tokenizers.Tokenizer``, or the path of a
    ``tokenizer.json`` or of a folder holding one. ``config``: more ``config.json`` entries (say a Hugging Face config's
    ``to_dict()``; ``model_type`` and ``transformers.js_config`` are the writer's; ``id2label`` names an image
    classifier's labels). ``preprocessor``: an image model's ``preprocessor_config.json``, a dict or a
    ``transformers`` image processor (``to_dict()``). The folder is built
    beside ``folder`` and swapped in whole: a failed write leaves ``folder`` as it was; an existing
    ``folder`` is replaced only when it is an earlier such export. Returns the folder's path."""
    arch = ARCHITECTURES.get(model_type)
    if arch is None:
        raise InputSpecError(f"model_type={model_type!r} has no transformers.js pipeline folder here; "
                             f"give one of {sorted(ARCHITECTURES)}")
    if arch.needs_tokenizer and tokenizer is None:
        raise InputSpecError(f"a {model_type!r} folder needs its tokenizer (transformers.js' {arch.pipeline} pipeline "
                             "encodes text with it): pass tokenizer=")
    if arch.needs_preprocessor and preprocessor is None:
        raise InputSpecError(f"a {model_type!r} folder needs its image preprocessing (transformers.js' {arch.pipeline} "
                             "pipeline makes pixel_values with it): pass preprocessor= (a dict or an image processor)")
    if preprocessor is not None and not arch.needs_preprocessor:
        raise InputSpecError(f"a {model_type!r} model reads no image: drop preprocessor=")
    if preprocessor is not None and not isinstance(preprocessor, Mapping):
        if not hasattr(preprocessor, "to_dict"):
            raise InputSpecError(f"preprocessor={preprocessor!r}: give a dict or a transformers image processor")
        preprocessor = preprocessor.to_dict()
    if isinstance(model, ir.Model):
        model = ir.to_proto(model)  # worked on as a copy: the caller's model stays as it was
    if not isinstance(model, onnx.ModelProto):
        raise InputSpecError(f"model must be an onnx.ModelProto or onnx_ir.Model (to_onnx's return), got "
                             f"{type(model).__name__}")
    ir_model = ir.serde.deserialize_model(model)
    check_io(ir_model, arch)
    Int64InputsPass(arch.int64_inputs)(ir_model)
    out = pathlib.Path(folder)
    with staged_folder(out) as staging:
        (staging / ONNX_FOLDER).mkdir()
        ir.save(ir_model, staging / ONNX_FOLDER / "model.onnx")
        write_json(staging / CONFIG_FILE, {**dict(config or {}), "model_type": arch.model_type,
                                           "architectures": [arch.class_name],
                                           TRANSFORMERS_JS_KEY: {"dtype": "fp32"}})
        if preprocessor is not None:
            write_json(staging / PREPROCESSOR_FILE, dict(preprocessor))
        if tokenizer is not None:
            write_tokenizer(tokenizer, staging, max_positions=(config or {}).get("max_position_embeddings"))
        write_json(staging / REPORT_FILE, {"model_type": arch.model_type, "pipeline": arch.pipeline,
                                           "files": {"model.onnx": {"dtype": "fp32"}}})
    return out


def check_io(model: ir.Model, arch: Architecture) -> None:
    """The graph's input and output names are the architecture's, or an error naming the difference."""
    inputs = [v.name for v in model.graph.inputs]
    outputs = [v.name for v in model.graph.outputs]
    known = set(arch.required) | set(arch.optional)
    missing = [n for n in arch.required if n not in inputs]
    extra = [n for n in inputs if n not in known]
    if missing or extra or not set(arch.outputs) <= set(outputs):
        raise InputSpecError(
            f"a {arch.model_type!r} folder's graph takes {list(arch.required)} (and optionally {list(arch.optional)}) "
            f"and returns {list(arch.outputs)}, as transformers.js feeds and reads them; this graph takes {inputs} and "
            f"returns {outputs}: export with to_onnx(..., input_names=[...], output_names=[...]) under those names")


class Int64InputsPass(ir.passes.InPlacePass):
    """The named graph inputs traced as int32 (JAX's default integer) made int64, each read through one
    ``Cast`` to int32: transformers.js (and optimum's exports) feed ids and masks as int64.

    ``input_names``: the export's ``input_names=`` when the pass runs before they are given (a
    rewrite pass does): an input is then found by its position among them, not by the name the
    trace gave it (a ``*args`` parameter traces as ``input_1``)."""

    def __init__(self, names: Sequence[str], input_names: Sequence[str] | None = None) -> None:
        super().__init__()
        self.names = tuple(names)
        self.input_names = tuple(input_names) if input_names else None

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        casts = []
        for position, value in enumerate(graph.inputs):
            name = self.input_names[position] if self.input_names and position < len(self.input_names) else value.name
            if name not in self.names or value.dtype != ir.DataType.INT32:
                continue
            narrow = ir.Value(name=f"{name}_int32", shape=value.shape, type=ir.TensorType(ir.DataType.INT32))
            ir.convenience.replace_all_uses_with(value, narrow)
            casts.append(ir.Node("", "Cast", [value], attributes=[ir.AttrInt64("to", ir.DataType.INT32)],
                                 outputs=[narrow]))
            value.dtype = ir.DataType.INT64
        if casts:
            first = next(iter(graph), None)
            if first is None:
                graph.extend(casts)
            else:
                graph.insert_before(first, casts)
        return ir.passes.PassResult(model, modified=bool(casts))


def write_tokenizer(tokenizer: Any, folder: pathlib.Path, *, max_positions: int | None = None) -> None:
    """``tokenizer.json`` and ``tokenizer_config.json`` (what transformers.js' ``AutoTokenizer`` reads)
    from a ``transformers`` fast tokenizer, a ``tokenizers.Tokenizer`` or a ``tokenizer.json`` path."""
    if hasattr(tokenizer, "save_pretrained"):
        if not getattr(tokenizer, "is_fast", False):
            raise InputSpecError(f"{type(tokenizer).__name__} is a slow tokenizer, which writes no tokenizer.json "
                                 "(what transformers.js reads); pass its fast counterpart (use_fast=True)")
        tokenizer.save_pretrained(str(folder))
    elif hasattr(tokenizer, "to_str"):
        (folder / "tokenizer.json").write_text(tokenizer.to_str(), encoding="utf-8")
    elif isinstance(tokenizer, (str, os.PathLike)) and pathlib.Path(tokenizer).is_file():
        shutil.copyfile(tokenizer, folder / "tokenizer.json")
    elif isinstance(tokenizer, (str, os.PathLike)) and (pathlib.Path(tokenizer) / "tokenizer.json").is_file():
        for name in TOKENIZER_FILES:
            if (pathlib.Path(tokenizer) / name).is_file():
                shutil.copyfile(pathlib.Path(tokenizer) / name, folder / name)
    else:
        raise InputSpecError(f"tokenizer={tokenizer!r}: give a transformers fast tokenizer, a tokenizers.Tokenizer, "
                             "the path of a tokenizer.json or of a folder holding one")
    write_default_tokenizer_config(folder, max_positions=max_positions)


def write_default_tokenizer_config(folder: pathlib.Path, *, max_positions: int | None) -> None:
    """The fast tokenizer's minimal ``tokenizer_config.json`` where the source wrote none (transformers.js'
    ``AutoTokenizer`` needs the file; the class and options come from ``tokenizer.json``)."""
    path = folder / "tokenizer_config.json"
    if not path.is_file():
        write_json(path, {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
                          "model_max_length": max_positions or 2**31 - 1})


def write_json(path: pathlib.Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


class staged_folder:
    """A temp folder beside ``out`` renamed to ``out`` when the body succeeds (an earlier export there
    moved aside, then removed) and removed when not; a non-empty ``out`` without :data:`REPORT_FILE`
    is refused (it is not an earlier export)."""

    def __init__(self, out: pathlib.Path) -> None:
        self.out = out

    def __enter__(self) -> pathlib.Path:
        out = self.out
        if out.exists() and not out.is_dir():
            raise InputSpecError(f"folder {str(out)!r} is a file; give a folder path")
        if out.is_dir() and any(out.iterdir()) and not (out / REPORT_FILE).exists():
            raise InputSpecError(f"folder {str(out)!r} holds files but no {REPORT_FILE}: it is not an earlier export, "
                                 "so it is not replaced; give an empty or new folder")
        out.parent.mkdir(parents=True, exist_ok=True)
        self.temp = pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}.jax2onnx-tmp-", dir=out.parent))
        return self.temp

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is not None:
            shutil.rmtree(self.temp, ignore_errors=True)
            return
        aside = None
        if self.out.exists():
            aside = pathlib.Path(tempfile.mkdtemp(prefix=f".{self.out.name}.jax2onnx-old-", dir=self.out.parent))
            aside.rmdir()
            self.out.rename(aside)
        try:
            self.temp.rename(self.out)
        except BaseException:
            if aside is not None:
                aside.rename(self.out)
            shutil.rmtree(self.temp, ignore_errors=True)
            raise
        if aside is not None:
            shutil.rmtree(aside, ignore_errors=True)

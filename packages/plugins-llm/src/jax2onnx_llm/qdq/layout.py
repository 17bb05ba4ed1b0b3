"""The static folder's files: the two graphs with their weights stored once, and the
``genai_config.json`` that names them.

**Shared weights.** Both graphs hold the same weights (the same float weights, quantized by the same
per-channel rule, so the same codes and scales). ``model.onnx.data`` stores each tensor of at least
:data:`EXTERNAL_BYTES` once, and each graph's initializer points at its offset (ONNX external data),
so the folder holds one copy; the small tensors (activation scales, which each graph calibrates for
itself) stay inside the graphs.

**Config.** onnxruntime-genai's decoder *pipeline* (the layout of its QNN/NPU models): the prefill
graph as the stage run on the prompt (``run_on_token_gen: false``), the decode graph as the stage
run per generated token (``run_on_prompt: false``), and ``sliding_window`` with ``slide_inputs``:
genai pads the prompt to whole windows of ``window_size`` tokens and runs them one by one, its
``attention_mask`` one ``(1, context_length)`` row with the real tokens at the end. Read from genai's
source (``generators.cpp``, ``position_inputs.cpp``, ``kv_cache.cpp``) and checked by running 0.18:

- ``alignment: "right"`` puts the prompt at the *end* of its padded windows (pad ids before it),
  the form genai's windowed mask assumes; ``"left"`` pads after the prompt;
- ``slide_key_value_cache: false``: the graphs slide their cache themselves (:mod:`.window`), so
  genai keeps its plain cache, which binds one ``(1, kv_heads, context_length, head_size)`` buffer
  as past and present (the sequence axis is a fixed number). genai's own sliding cache is built
  only where the device asks for it (QNN) and takes uint8 caches only;
- genai counts the padded prompt in ``max_length``: a prompt of ``n`` tokens leaves
  ``context_length - P * ceil(n / P)`` new ones.
"""

from __future__ import annotations

import hashlib
import pathlib
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from ..genai_config import SEARCH_DEFAULTS, check_search
from ..spec import DecoderSpec

PREFILL_FILE = "prefill.onnx"
DECODE_FILE = "decode.onnx"
DATA_FILE = "model.onnx.data"
CONFIG_FILE = "genai_config.json"
#: genai's model type for a decoder run as a pipeline of graphs (whatever the family)
PIPELINE_TYPE = "decoder-pipeline"
#: tensors of at least this many bytes go to the shared data file
EXTERNAL_BYTES = 1024
_ALIGN = 64


def io_names(num_layers: int) -> tuple[list[str], list[str]]:
    """The graphs' input and output names, in the config's patterns (past/present interleaved per
    layer as key, value)."""
    layers = [(i, kv) for i in range(num_layers) for kv in ("key", "value")]
    return (["input_ids", "attention_mask", *(f"past_key_values.{i}.{kv}" for i, kv in layers)],
            ["logits", *(f"present.{i}.{kv}" for i, kv in layers)])


def write_shared(protos: dict[str, onnx.ModelProto], folder: pathlib.Path) -> dict[str, int]:
    """Each model into ``folder`` under its file name, its large tensors pointing into one
    ``model.onnx.data`` that stores each distinct tensor once; returns ``{"stored": n, "shared": m}``
    (tensors written, references that reused one)."""
    offsets: dict[bytes, tuple[int, int]] = {}
    stored = shared = 0
    with open(folder / DATA_FILE, "wb") as data:
        for name, proto in protos.items():
            for tensor in proto.graph.initializer:
                # the proto's own bytes (packed 4-bit codes stay packed); typed fields as their array's
                raw = tensor.raw_data or np.ascontiguousarray(numpy_helper.to_array(tensor)).tobytes()
                if len(raw) < EXTERNAL_BYTES:
                    continue
                key = hashlib.sha256(bytes([tensor.data_type]) + str(list(tensor.dims)).encode() + raw).digest()
                if key in offsets:
                    shared += 1
                else:
                    data.seek(0, 2)
                    offset = -(-data.tell() // _ALIGN) * _ALIGN
                    data.write(b"\0" * (offset - data.tell()))
                    data.write(raw)
                    offsets[key] = (offset, len(raw))
                    stored += 1
                offset, length = offsets[key]
                for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data"):
                    tensor.ClearField(field)
                tensor.data_location = onnx.TensorProto.EXTERNAL
                del tensor.external_data[:]
                for k, v in (("location", DATA_FILE), ("offset", str(offset)), ("length", str(length))):
                    entry = tensor.external_data.add()
                    entry.key, entry.value = k, v
            onnx.save_model(proto, str(folder / name))
    return {"stored": stored, "shared": shared}


def genai_config(spec: DecoderSpec, *, max_length: int, window: int, search: dict[str, Any] | None) -> dict[str, Any]:
    inputs = {"input_ids": "input_ids", "attention_mask": "attention_mask",
              "past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"}
    outputs = {"logits": "logits", "present_key_names": "present.%d.key", "present_value_names": "present.%d.value"}
    names_in, names_out = io_names(spec.num_layers)
    stage = {"inputs": names_in, "outputs": names_out}
    return {
        "model": {
            "bos_token_id": spec.bos_token_id if spec.bos_token_id is not None else 0,
            "context_length": max_length,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "head_size": spec.head_size,
                "hidden_size": spec.hidden_size,
                "inputs": inputs,
                "outputs": outputs,
                "num_attention_heads": spec.num_heads,
                "num_hidden_layers": spec.num_layers,
                "num_key_value_heads": spec.num_kv_heads,
                "sliding_window": {"window_size": window, "pad_value": spec.pad_token_id, "alignment": "right",
                                   "slide_key_value_cache": False, "slide_inputs": True},
                "pipeline": [
                    {"context": {"filename": PREFILL_FILE, **stage, "run_on_token_gen": False}},
                    {"iterator": {"filename": DECODE_FILE, **stage, "run_on_prompt": False}},
                ],
            },
            "eos_token_id": spec.eos_token_id,
            "pad_token_id": spec.pad_token_id,
            "type": PIPELINE_TYPE,
            "vocab_size": spec.vocab_size,
        },
        "search": dict(sorted({**SEARCH_DEFAULTS, "max_length": max_length, "past_present_share_buffer": True,
                               **check_search(search, max_length=max_length)}.items())),
    }


__all__ = ["CONFIG_FILE", "DATA_FILE", "DECODE_FILE", "PREFILL_FILE", "genai_config", "io_names", "write_shared"]

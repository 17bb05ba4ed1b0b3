"""Which attention layers of an export fused, and why the others did not.

During an export a :func:`recording` is open (``export._write_model``); the KerasHub adapters
register their decoder layers (:func:`register`), the regions that fuse (the front-ends'
``attention.py``, ``core_attention.py``, ``attend``) tag the fused node with its decoder layer's index
(:func:`tag`), and code that declines a layer says why (:func:`decline`).
:class:`AttentionReportPass`, in the rewrite slot, reads the tags off the graph (so a region that was
declined at lowering, or removed, is reported as it ended; fused nodes that know no layer, the
Hugging Face layers', count in graph order when there is one per remaining layer) and writes one JSON
list to the model's metadata, ``jax2onnx_llm:attention``: per decoder layer, the fused op or the
reason. :func:`attention_fusions` reads it back; ``jax2onnx llm`` prints it.

The record is a ``contextvars`` value of the running export, so two threads exporting at once
each fill their own.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

import onnx_ir as ir

#: the model's metadata key: a JSON list, one entry per decoder layer
KEY = "jax2onnx_llm:attention"
#: a fused attention node's metadata key: its decoder layer's index
TAG = "jax2onnx_llm:layer"
#: the fused ops, as (domain, op type) -> the report's name
FUSED_OPS = {("com.microsoft", "GroupQueryAttention"): "com.microsoft.GroupQueryAttention",
             ("", "Attention"): "Attention"}
#: a layer with neither a fused node nor a reason: the lowering declined it for this target and opset
NO_FUSED_OP = "the target has no fused attention op at this opset (opset >= 23 for Attention)"


class Record:
    """One export's attention layers: each sublayer of decoder ``i`` maps to ``i``."""

    def __init__(self) -> None:
        self.num_layers = 0
        self.index: dict[int, int] = {}
        self.layers: list[Any] = []  # kept alive, so the ids above stay theirs
        self.reasons: dict[int, str] = {}


_RECORD: contextvars.ContextVar[Record | None] = contextvars.ContextVar("jax2onnx_llm_attention", default=None)


@contextlib.contextmanager
def recording() -> Iterator[Record]:
    record = Record()
    token = _RECORD.set(record)
    try:
        yield record
    finally:
        _RECORD.reset(token)


def register(decoders: Iterable[Any]) -> None:
    """The running export's decoder layers, in order; each one's sublayers answer its index."""
    record = _RECORD.get()
    if record is None:
        return
    decoders = list(decoders)
    record.num_layers = len(decoders)
    for i, decoder in enumerate(decoders):
        flatten = getattr(decoder, "_flatten_layers", None)
        for layer in [decoder, *(flatten(include_self=False, recursive=True) if callable(flatten) else [])]:
            record.index.setdefault(id(layer), i)
            record.layers.append(layer)


def layer_index(layer: Any) -> int:
    """The decoder index of ``layer`` (a decoder or one of its sublayers); -1 when not recorded."""
    record = _RECORD.get()
    return -1 if record is None else record.index.get(id(layer), -1)


def decline(index: int, reason: str) -> None:
    """Layer ``index`` runs the library's own attention, because of ``reason`` (the first one said stays)."""
    record = _RECORD.get()
    if record is not None and index >= 0:
        record.reasons.setdefault(index, reason)


def tag(value: ir.Value, index: int) -> None:
    """Mark the fused attention node ``value`` comes from (the node itself or a reshape/transpose of
    its output, a few producers up) as decoder layer ``index``'s."""
    node = value.producer()
    for _ in range(4):
        if node is None or index < 0:
            return
        if (node.domain or "", node.op_type) in FUSED_OPS:
            node.metadata_props[TAG] = str(index)
            return
        node = node.inputs[0].producer() if node.inputs and node.inputs[0] is not None else None


class AttentionReportPass(ir.passes.InPlacePass):
    """Writes the per-layer fusion list (``KEY``) from the fused nodes' tags and the record's reasons."""

    def __init__(self, record: Record) -> None:
        super().__init__()
        self.record = record

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        fused: dict[int, str] = {}
        untagged: list[str] = []
        for node in ir.traversal.RecursiveGraphIterator(model.graph):
            name = FUSED_OPS.get((node.domain or "", node.op_type))
            index = node.metadata_props.get(TAG)
            if name is not None:
                if index is not None:
                    fused.setdefault(int(index), name)
                else:
                    untagged.append(name)
        # fused regions that do not know their layer (the Hugging Face layers'): one per layer, in
        # graph order, when they are exactly one per untagged layer
        rest = [i for i in range(self.record.num_layers) if i not in fused]
        if untagged and len(untagged) == len(rest):
            fused.update(zip(rest, untagged))
        layers = []
        for i in range(max(self.record.num_layers, max(fused, default=-1) + 1)):
            if i in fused:
                layers.append({"layer": i, "fused": fused[i]})
            else:
                layers.append({"layer": i, "fused": None, "reason": self.record.reasons.get(i, NO_FUSED_OP)})
        model.metadata_props[KEY] = json.dumps(layers)
        return ir.passes.PassResult(model, False)


def attention_fusions(model: Any) -> list[dict[str, Any]]:
    """The per-layer list an export wrote: ``[{"layer": 0, "fused": "com.microsoft.GroupQueryAttention"},
    {"layer": 1, "fused": None, "reason": "..."}, ...]``. ``model``: an export folder, a ``model.onnx``
    path or an ``onnx.ModelProto``; ``[]`` for a model without the list."""
    import onnx

    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if os.path.isdir(path):
            path = os.path.join(path, "model.onnx")
        model = onnx.load(path, load_external_data=False)
    for prop in model.metadata_props:
        if prop.key == KEY:
            return list(json.loads(prop.value))
    return []


def describe(layers: list[dict[str, Any]]) -> list[str]:
    """One line per run of layers with the same outcome (``layers 0-3: GroupQueryAttention``)."""
    lines: list[str] = []
    runs: list[tuple[int, int, str]] = []
    for entry in layers:
        text = entry["fused"] or f"not fused: {entry.get('reason')}"
        if runs and runs[-1][2] == text and runs[-1][1] == entry["layer"] - 1:
            runs[-1] = (runs[-1][0], entry["layer"], text)
        else:
            runs.append((entry["layer"], entry["layer"], text))
    for first, last, text in runs:
        where = f"layer {first}" if first == last else f"layers {first}-{last}"
        lines.append(f"{where}: {text}")
    return lines


__all__ = ["KEY", "AttentionReportPass", "attention_fusions", "decline", "describe", "layer_index", "recording",
           "register", "tag"]

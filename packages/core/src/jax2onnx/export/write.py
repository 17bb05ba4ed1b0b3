"""Stage ``write``: the optimized ``onnx_ir.Model`` → an :class:`Artifact` (proto, file, or both).

The one place that decides about external data: ``external_data=None`` means "when the weights
exceed protobuf's limit, or when any weight is read only as it is written" (a streamed
:class:`~jax2onnx.Weights` leaf, a device-resident array, or a quantized part of one: those go to the
weights file one tensor at a time at every model size, never gathered into one proto first),
``export_mode="web"`` forbids it (one self-contained file), and a self-contained model over 2 GB is
refused with the fix. Files are replaced atomically
(:mod:`jax2onnx.export.saving`); the weights file is ``<model file>.<hash>.data``, or the fixed
``external_data_file`` a front-end names (the LLM folder's ``model.onnx.data``).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

import onnx
import onnx_ir as ir

from ..errors import InputSpecError
from ..ir.graphs import all_graphs
from ..progress import current as current_progress
from ..verification.compare import remember_saved
from .options import Export
from .saving import EXTERNAL_THRESHOLD_BYTES, save_model_file, save_with_external_data, streamed_bytes

#: Above this many bytes of weights, a model goes to external data automatically (protobuf caps one
#: message at 2 GB, and the graph itself needs room too).
EXTERNAL_DATA_AUTO_BYTES = 1_800_000_000
#: Protobuf's hard limit for one serialized message (one self-contained ONNX file).
PROTOBUF_LIMIT_BYTES = 2**31


@dataclasses.dataclass(frozen=True)
class Artifact:
    """The written export: the model, its proto when one was serialized, the file when one was written."""

    model: ir.Model
    proto: onnx.ModelProto | None
    path: str | None
    external_data: bool

    def result(self, return_mode: str) -> onnx.ModelProto | ir.Model | str:
        """What ``to_onnx`` returns for ``return_mode``."""
        if return_mode == "ir":
            return self.model
        if return_mode == "file":
            assert self.path is not None  # ExportOptions.check: return_mode='file' needs output_path
            return self.path
        return self.proto if self.proto is not None else ir.to_proto(self.model)

    def runnable(self) -> Any:
        """What onnxruntime runs: the written file when there is one (its external data memory-mapped),
        else the proto."""
        if self.path is not None:
            return self.path
        return self.proto if self.proto is not None else ir.to_proto(self.model)


def write(export: Export, model: ir.Model) -> Artifact:
    options = export.options
    output_path = options.output_path
    weight_bytes = sum(v.const_value.nbytes for v in model.graph.initializers.values() if v.const_value is not None)
    too_big = weight_bytes > EXTERNAL_DATA_AUTO_BYTES
    # a streamed weight inlined would be loaded, with all the others, into one proto: streamed
    # weights are written tensor by tensor wherever there is a file to write them beside
    streamed = output_path is not None and any(isinstance(v.const_value, ir.LazyTensor)
                                               for v in model.graph.initializers.values())
    external = (too_big or streamed) if options.external_data is None else options.external_data
    if not external and too_big and options.export_mode == "web" and output_path is not None:
        raise InputSpecError(
            f"export_mode='web' needs one self-contained file, but the weights take {weight_bytes / 2**30:.2f} GiB, "
            "over protobuf's 2 GB limit; use export_mode='standard' (weights beside the model in <path>.<hash>.data)"
        )
    if not external and weight_bytes >= PROTOBUF_LIMIT_BYTES:
        raise InputSpecError(
            f"external_data=False, but the weights take {weight_bytes / 2**30:.2f} GiB: one self-contained ONNX file "
            "(a single protobuf message) holds at most 2 GB. Pass external_data=True (or leave it None) with "
            "output_path=... so the weights are written beside the model"
        )
    if options.return_mode == "ir":  # the model itself is returned: serialize only to write the file
        if output_path is not None:
            if external:
                _save_external(model, output_path, options.external_data_file)
            else:
                _save_single(model, output_path)
        return Artifact(model, None, output_path, bool(external))
    if external:
        if output_path is None:
            why = ("external_data=True writes the weights into a file beside the model" if options.external_data else
                   f"the model's weights take {weight_bytes / 2**30:.2f} GiB, over protobuf's 2 GB limit for one message")
            raise InputSpecError(f"{why}: pass output_path=... so they can be written as external data beside the model")
        proto = _save_external(model, output_path, options.external_data_file)
        remember_saved(proto, output_path)  # a returned proto then runs with its weights (verify, allclose)
        return Artifact(model, proto, output_path, True)
    if output_path is not None:
        _save_single(model, output_path)
    # written tensor by tensor, never as one proto: one is built only where one is returned
    proto = ir.to_proto(model) if options.return_mode == "proto" else None
    return Artifact(model, proto, output_path, False)


def _save_external(model: ir.Model, path: str, data_file: str | None) -> onnx.ModelProto:
    """:func:`save_with_external_data`, each tensor counted by the export's progress reporter as it
    is written (tensors and bytes)."""
    total = sum(v.const_value.nbytes for g in all_graphs(model) if isinstance(g, ir.Graph)
                for v in g.initializers.values()
                if v.const_value is not None and v.const_value.nbytes > EXTERNAL_THRESHOLD_BYTES)
    with _counting(total) as on_tensor:
        return save_with_external_data(model, path, data_file, on_tensor=on_tensor)


def _save_single(model: ir.Model, path: str) -> None:
    """:func:`save_model_file` (one self-contained file), its large tensors counted likewise."""
    with _counting(streamed_bytes(model)) as on_tensor:
        save_model_file(model, path, on_tensor=on_tensor)


@contextlib.contextmanager
def _counting(total: int) -> Iterator[Callable[[int, int, int], None]]:
    """A writer's ``on_tensor(index, count, nbytes)`` hook reporting to the export's progress
    reporter: ``writing(count, total)`` at the first tensor, ``wrote(nbytes)`` as each is done."""
    reporter = current_progress()
    started = [0]  # the bytes of the tensor being written: counted once the next one starts

    def on_tensor(index: int, count: int, nbytes: int) -> None:
        if index == 0:
            reporter.writing(count, total)
        else:
            reporter.wrote(started[0])
        started[0] = nbytes

    yield on_tensor
    if started[0]:
        reporter.wrote(started[0])

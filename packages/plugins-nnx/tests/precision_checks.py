"""Checks the precision tests share (test_precision.py, test_precision_bodies.py)."""

from __future__ import annotations

import onnx
from jax2onnx.verification.report import _tensor_nbytes


def weight_bytes(model: onnx.ModelProto) -> int:
    return sum(_tensor_nbytes(t) for t in model.graph.initializer)


def cast_feeding_cast(model: onnx.ModelProto) -> list[str]:
    producers = {o: n for n in model.graph.node for o in n.output}
    return [n.name for n in model.graph.node if n.op_type == "Cast" and producers.get(n.input[0]) is not None
            and producers[n.input[0]].op_type == "Cast"]


def io_types(model: onnx.ModelProto) -> set[int]:
    return {v.type.tensor_type.elem_type for v in [*model.graph.input, *model.graph.output]}

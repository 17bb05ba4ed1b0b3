"""Checks the graph-pass tests share: a model run in onnxruntime, and a pass that must leave the
outputs as they were."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort


def run_model(model: ir.Model, feeds: dict[str, np.ndarray], check: bool = True) -> list[np.ndarray]:
    """``model`` run in onnxruntime on ``feeds``, checked (``full_check``) first unless ``check`` is
    False (hand-built graphs whose inner values carry no types, which the checker refuses)."""
    proto = ir.to_proto(model)
    if check:
        onnx.checker.check_model(proto, full_check=True)
    return ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def pass_keeps_outputs(build: Callable[[], ir.Model], feeds: dict[str, np.ndarray], *passes: Any,
                       bitwise: bool = False, check: bool = True) -> tuple[ir.Model, Any, list[np.ndarray]]:
    """``passes`` run in turn on a fresh ``build()``; its outputs equal (same shape and dtype, and
    with ``bitwise`` the same bytes) those of the graph before them (``check``: see :func:`run_model`). Returns the model after them,
    the first pass's result and the outputs."""
    before = run_model(build(), feeds, check)
    model = build()
    result = passes[0](model)
    for later in passes[1:]:
        later(model)
    after = run_model(model, feeds, check)
    for a, b in zip(before, after, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        if bitwise:
            assert a.tobytes() == b.tobytes()
        else:
            np.testing.assert_array_equal(a, b)
    return model, result, after

"""Precision("qdq", ...) (target="qdq", the NPU form) checked once, with core alone: each bad field is
one clear line naming it and the fix, raised before tracing; the defaults are filled and frozen.

The QDQ exports themselves (structure, accuracy against onnxruntime's quantize_static, the check
command) are tested on NNX models where their lowerings are: packages/plugins-nnx/tests/test_target_qdq.py."""

from __future__ import annotations

import pytest
from jax2onnx import Precision, PrecisionError, to_onnx
from jax2onnx.precision import parse_precision


@pytest.mark.parametrize(("precision", "message"), [
    (Precision("qdq", activations="int8"), "activations='int8': Precision\\('qdq'\\) takes 'uint16'.*or 'uint8'"),
    (Precision("qdq", activations="dynamic"), "activations='dynamic'"),
    (Precision("qdq", weights="int2"), "weights='int2'.*'int8'.*'uint8'.*'int4'"),
    (Precision("qdq", weights="int4", block_size=48), "block_size=48"),
    (Precision("qdq", dims=[("B", 1), ("T", 2), 3]), "dims takes a mapping"),
    (Precision("qdq", dims={"B": 0}), "dims\\['B'\\]=0: give a positive int"),
    (Precision("qdq", dims={"B": True}), "dims\\['B'\\]=True"),
    (Precision("qdq", method="gptq"), "method= is not read by Precision\\('qdq'"),
    (Precision("qdq", int8=["head"]), "int8= is not read"),
    (Precision("qdq", keep_io_types=False), "keep_io_types=False"),
    (Precision("qdq", calibration="text"), "calibration takes a list of input batches"),
    (Precision("int8", weights="int8"), "weights= is read by a target's own precision form \\('qdq'\\); precision 'int8' takes none"),
    (Precision("int4", dims={"B": 1}), "dims= is read by.*precision 'int4' takes none \\(drop dims=\\)"),
])
def test_bad_qdq_options_are_one_clear_line(mini_registry, precision, message):
    with pytest.raises(PrecisionError, match=message) as info:
        to_onnx(lambda x: x + 1.0, [(2, 3)], target="qdq" if precision.kind == "qdq" else "onnx", precision=precision)
    assert "\n" not in str(info.value)


def test_qdq_defaults_are_filled_once_and_frozen():
    import numpy as np

    p = parse_precision(Precision("qdq", dims={"T": 4, "B": 1}, calibration=[np.zeros((1, 3), np.float32)]))
    assert (p.activations, p.weights, p.dims) == ("uint16", "int8", (("B", 1), ("T", 4)))
    assert len(p.calibration) == 1 and p.calibration[0][0].shape == (1, 3)
    assert parse_precision(p) == p  # checking a checked precision changes nothing
    assert "uint16 activations, int8 weights" in p.describe()
    with pytest.raises(AttributeError):
        p.weights = "uint8"  # type: ignore[misc]

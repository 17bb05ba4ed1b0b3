"""target="qdq" (issue #45 item 3) against onnxruntime's own static quantizer, on the tiny MLP and
CNN of packages/plugins-nnx/tests/test_target_qdq.py (the same classes, seeds and data) and an NNX
pre-LN transformer block (d=64, 4 heads, 16 tokens: LayerNormalization and the opset-23 Attention
op stay float between the pairs).

For each activation/weight type: our export with 8 calibration batches, and
``onnxruntime.quantization.quantize_static`` (QDQ, per channel, min/max, the same types and batches)
applied to our float32 export; cosine of each with the float32 JAX function over 8 held-out
batches, with onnxruntime's graph optimizations off (the graph as stated) and on (what its CPU
kernels compute: its fused uint8 x int8 kernel saturates on AVX2 without VNNI). int4 weights have
no anchor row (quantize_static's int4 is not per-block here). Also the probe set (no calibration
data) for each model. Writes bench/results/qdq_accuracy.md. Run: ``python bench/qdq_accuracy.py``.
"""

from __future__ import annotations

import os
import sys
import tempfile

import numpy as np
import onnxruntime as ort
from flax import nnx
from jax2onnx import Precision, to_onnx
from jax2onnx.verification.precision import cosine
from onnxruntime.quantization import CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType, quantize_static

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "packages", "plugins-nnx", "tests"))
from jax2onnx_nnx.testcases.models import PreLNTransformerLayer  # noqa: E402
from test_target_qdq import MODELS  # noqa: E402  (the test's models, so the figures are the test's)


def _block(rngs):
    block = PreLNTransformerLayer(64, 4, 256, rngs=rngs)
    block.eval()
    return block


MODELS = {**MODELS, "block64": (_block, (1, 16, 64))}

TYPES = [("uint16", "int8"), ("uint8", "int8"), ("uint8", "uint8"), ("uint16", "uint8"), ("uint16", "int4"),
         ("uint8", "int4")]
ORT_TYPES = {"uint16": QuantType.QUInt16, "uint8": QuantType.QUInt8, "int8": QuantType.QInt8}


def run(path_or_model, xs, optimized):
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    data = path_or_model if isinstance(path_or_model, str) else path_or_model.SerializeToString()
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {session.get_inputs()[0].name: x})[0] for x in xs])


def main() -> None:
    rows = ["| model | activations | weights | calibration | ours (opt. off) | quantize_static (opt. off) | "
            "error ratio | ours (opt. on) | quantize_static (opt. on) |", "| --- " * 9 + "|"]
    tmp = tempfile.mkdtemp()
    for name, (make, shape) in MODELS.items():
        fn = make(nnx.Rngs(0))
        rng = np.random.default_rng(7)  # as the test
        calibration = [rng.standard_normal(shape).astype(np.float32) for _ in range(8)]
        held_out = rng.standard_normal((8, *shape[1:])).astype(np.float32).reshape(-1, *shape)
        reference = np.concatenate([np.asarray(fn(x)) for x in held_out])
        float_path = os.path.join(tmp, f"{name}.onnx")
        to_onnx(fn, [shape], output_path=float_path)
        for activations, weights in TYPES:
            for data in ("8 batches", "probe set"):
                if data == "probe set" and (activations, weights) != ("uint16", "int8"):
                    continue
                given = [[c] for c in calibration] if data == "8 batches" else ()
                ours = to_onnx(fn, [shape], target="qdq", precision=Precision(
                    "qdq", activations=activations, weights=weights, calibration=given))
                cells = [cosine(reference, run(ours, held_out, False)), None, None,
                         cosine(reference, run(ours, held_out, True)), None]
                if weights in ORT_TYPES and data == "8 batches":
                    reader = iter({"x": c} for c in calibration)

                    class Reader(CalibrationDataReader):
                        def get_next(self):
                            return next(reader, None)

                    anchor = os.path.join(tmp, f"{name}_anchor.onnx")
                    quantize_static(float_path, anchor, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                                    activation_type=ORT_TYPES[activations], weight_type=ORT_TYPES[weights],
                                    calibrate_method=CalibrationMethod.MinMax)
                    cells[1] = cosine(reference, run(anchor, held_out, False))
                    cells[2] = (1 - cells[0]) / max(1 - cells[1], 1e-12)
                    cells[4] = cosine(reference, run(anchor, held_out, True))
                shown = ["-" if c is None else (f"{c:.2f}x" if i == 2 else f"{c:.6f}") for i, c in enumerate(cells)]
                rows.append(f"| {name} | {activations} | {weights} | {data} | " + " | ".join(shown) + " |")
                print(rows[-1], flush=True)
    text = ("# target=\"qdq\" against onnxruntime's quantize_static\n\n"
            f"`python bench/qdq_accuracy.py` (onnxruntime {ort.__version__}; cosine with the float32 JAX function "
            "over 8 held-out batches; error ratio: (1 - ours) / (1 - quantize_static), graph optimizations off).\n\n"
            + "\n".join(rows) + "\n")
    out = os.path.join(os.path.dirname(__file__), "results", "qdq_accuracy.md")
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()

"""The README's main job: convert the seed's quickstart MLP, verify it against JAX, say where it is.

    python -m jax2onnx_examples.quickstart [OUTPUT.onnx]
"""

from __future__ import annotations

import os
import sys

from flax import nnx
from jax2onnx import to_onnx, verify

# The README's quickstart model (Linear, Dropout, BatchNorm, gelu, Linear, from the Flax docs),
# defined once: beside the nnx pack's testcases that pin its graph to 4 nodes.
from jax2onnx_nnx.testcases.models import QuickstartMLP as MLP


def main(output: str = "quickstart_mlp.onnx") -> int:
    model = MLP(din=30, dmid=20, dout=10, rngs=nnx.Rngs(0))
    model.eval()  # inference: BatchNorm uses running stats, Dropout is off
    onnx_model = to_onnx(model, [("B", 30)], output_path=output)
    # What verify=True runs: random inputs at the sizes jax2onnx.verify tries for each symbolic dim.
    report = verify(model, onnx_model, [("B", 30)])
    batches = ", ".join(str(next(iter(trial.inputs.values()))[0]) for trial in report.trials)
    worst = max(check.max_abs_error for check in report.worst())
    ops = [n.op_type for n in onnx_model.graph.node]
    print(f"ONNX model written to {os.path.abspath(output)}")
    print(f"graph: {len(ops)} nodes ({', '.join(ops)}), input x: [B, 30], output: [B, 10]")
    print(f"verification against JAX in onnxruntime (batch {batches}): {'OK' if report.ok else 'MISMATCH'}, "
          f"largest abs difference {worst:.3g}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))

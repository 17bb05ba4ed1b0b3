"""The int8 weight-matmul forms one by one in onnxruntime's CPU provider at 1 thread: why
``precision="int8"`` writes 8-bit ``MatMulNBits`` with ``accuracy_level=4`` under
``target="onnxruntime"`` (jax2onnx.targets.precision_forms.INT8_ACCURACY_LEVEL) and what the
weight-only default costs against the per-tensor dynamic form (``activations="dynamic"``).

    python bench/int8_matmul_forms.py                  # GPT-2-sized MLP weight [768, 3072]
    python bench/int8_matmul_forms.py --k 256 --n 1024

One weight ``[K, N]`` (random normal), one single-node model per form, every session at 1 intra-op
thread, runs interleaved round by round; median process CPU ms per call (the fair figure on a
shared machine) for M = 1 row (one decoded token) and M = 128 rows (a prefill), and 1 - cosine
against the float32 product:

- ``float32``: ``MatMul``.
- ``DequantizeLinear + MatMul``: int8 codes, a scale per column (the standard form; onnxruntime
  fuses it into 8-bit MatMulNBits at its default accuracy level, 4, when the session starts);
  ``... (accuracy_level 1)`` the same with ``session.qdq_matmulnbits_accuracy_level=1``.
- ``MatMulNBits 8-bit block B acc L``: int8 codes in blocks of B along K, ``accuracy_level`` L (1:
  float32 compute, 4: the activations rounded to int8 per block inside the kernel).
- ``DynamicQuantizeMatMul``: the activations quantized per tensor at run time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "packages", "core", "src"))


def forms(K: int, N: int, rng: np.random.Generator) -> tuple[np.ndarray, dict]:
    from jax2onnx.targets.weight_layouts import int8_blocks, int8_per_column
    from onnx import TensorProto, helper, numpy_helper

    def model(nodes, inits):
        graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("A", TensorProto.FLOAT, ["M", K])],
                                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["M", N])],
                                  [numpy_helper.from_array(v, k) for k, v in inits.items()])
        return helper.make_model(graph, ir_version=10,  # onnxruntime 1.31 reads IR 13 at most
                                 opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)])

    w = (rng.standard_normal((K, N)) * 0.05).astype(np.float32)
    codes, scales = int8_per_column(w)
    out = {"float32": (model([helper.make_node("MatMul", ["A", "W"], ["Y"])], {"W": w}), {})}
    dq = model([helper.make_node("DequantizeLinear", ["Q", "S"], ["W"], axis=1), helper.make_node("MatMul", ["A", "W"], ["Y"])],
               {"Q": codes, "S": scales})
    out["DequantizeLinear + MatMul"] = (dq, {})
    out["DequantizeLinear + MatMul (accuracy_level 1)"] = (dq, {"session.qdq_matmulnbits_accuracy_level": "1"})
    for block in (32, 128):
        b, s = int8_blocks(w, block)
        for level in (1, 4):
            node = helper.make_node("MatMulNBits", ["A", "B", "S"], ["Y"], domain="com.microsoft", K=K, N=N, bits=8,
                                    block_size=block, accuracy_level=level)
            out[f"MatMulNBits 8-bit block {block} acc {level}"] = (model([node], {"B": b, "S": s}), {})
    dyn = helper.make_node("DynamicQuantizeMatMul", ["A", "Q", "S"], ["Y"], domain="com.microsoft")
    out["DynamicQuantizeMatMul"] = (model([dyn], {"Q": codes, "S": scales}), {})
    return w, out


def main(argv: list[str] | None = None) -> int:
    import onnxruntime as ort

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=768)
    parser.add_argument("--n", type=int, default=3072)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    w, models = forms(args.k, args.n, rng)
    sessions = {}
    for label, (model, config) in models.items():
        so = ort.SessionOptions()
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        for key, value in config.items():
            so.add_session_config_entry(key, value)
        sessions[label] = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    print(f"onnxruntime {ort.__version__}, K={args.k} N={args.n}, 1 thread, load {os.getloadavg()[0]:.1f}")
    for rows in (1, 128):
        a = rng.standard_normal((rows, args.k)).astype(np.float32)
        want = a @ w
        calls = max(2, 256 // rows)
        cpu: dict[str, list[float]] = {label: [] for label in sessions}
        for _ in range(args.rounds):
            for label, sess in sessions.items():
                start = time.process_time()
                for _ in range(calls):
                    sess.run(None, {"A": a})
                cpu[label].append((time.process_time() - start) / calls * 1e3)
        base = statistics.median(cpu["float32"])
        for label, sess in sessions.items():
            got = sess.run(None, {"A": a})[0]
            cos = float(np.dot(got.ravel(), want.ravel()) / np.linalg.norm(got) / np.linalg.norm(want))
            ms = statistics.median(cpu[label])
            print(f"M={rows:<4} {label:46} {ms:8.3f} ms CPU ({ms / base:5.2f}x float32)  1-cos {1 - cos:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

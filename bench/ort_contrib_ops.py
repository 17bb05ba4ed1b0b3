"""Which onnxruntime contrib ops (com.microsoft) beat the standard-op graph they replace, op by op.

    python bench/ort_contrib_ops.py [--batch 8] [--tokens 64] [--width 64] [--heads 4] [--threads 1] [--runs 200]

For each rewrite of ``target="onnxruntime"`` (jax2onnx.targets.onnxruntime.rewrites) and each
candidate it ruled out, a pair of small models (the standard form, the contrib form) at transformer-layer shapes, run interleaved in
onnxruntime (CPU, ``--threads`` intra-op threads); prints the median latency of each and their
ratio, and asserts nothing. The rewrite family enables a rule only where this measured a gain.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits, opset=23):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)])


def _vi(name, shape):
    return helper.make_tensor_value_info(name, F, shape)


def _const(name, array):
    return helper.make_tensor(name, F, array.shape, array.astype(np.float32).ravel())


def pairs(b, s, d, heads):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, s, d)).astype(np.float32)
    r = rng.standard_normal((b, s, d)).astype(np.float32)
    gamma, beta, bias = (_const(n, rng.standard_normal(d)) for n in ("gamma", "beta", "bias"))
    wide_bias = _const("bias", rng.standard_normal(4 * d))
    h = rng.standard_normal((b, s, 4 * d)).astype(np.float32)
    io = [_vi("x", [b, s, d]), _vi("r", [b, s, d])]
    out = [_vi("y", [b, s, d])]
    yield "SkipLayerNormalization", {"x": x, "r": r}, _model(
        [helper.make_node("Add", ["x", "r"], ["a"]),
         helper.make_node("LayerNormalization", ["a", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-6)],
        io, out, [gamma, beta]), _model(
        [helper.make_node("SkipLayerNormalization", ["x", "r", "gamma", "beta"], ["y"], domain="com.microsoft",
                          epsilon=1e-6)], io, out, [gamma, beta])
    # the residual stream of a pre-LN transformer: the sum is read by the next layer too
    yield "SkipLayerNormalization+sum", {"x": x, "r": r}, _model(
        [helper.make_node("Add", ["x", "bias"], ["xb"]), helper.make_node("Add", ["xb", "r"], ["s"]),
         helper.make_node("LayerNormalization", ["s", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-6)],
        io, out + [_vi("s", [b, s, d])], [gamma, beta, bias]), _model(
        [helper.make_node("SkipLayerNormalization", ["x", "r", "gamma", "beta", "bias"], ["y", "", "", "s"],
                          domain="com.microsoft", epsilon=1e-6)], io, out + [_vi("s", [b, s, d])], [gamma, beta, bias])
    yield "SkipLayerNormalization+bias", {"x": x, "r": r}, _model(
        [helper.make_node("Add", ["x", "bias"], ["xb"]), helper.make_node("Add", ["xb", "r"], ["a"]),
         helper.make_node("LayerNormalization", ["a", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-6)],
        io, out, [gamma, beta, bias]), _model(
        [helper.make_node("SkipLayerNormalization", ["x", "r", "gamma", "beta", "bias"], ["y"], domain="com.microsoft",
                          epsilon=1e-6)], io, out, [gamma, beta, bias])
    # the residual_sum rule: the sum as Sum, which no onnxruntime optimizer fuses into
    # SkipLayerNormalization (compare with graph optimizations on, where the Add is fused)
    yield "Sum (kept from SkipLN fusion)", {"x": x, "r": r}, _model(
        [helper.make_node("Add", ["x", "r"], ["a"]),
         helper.make_node("LayerNormalization", ["a", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-6)],
        io, out, [gamma, beta]), _model(
        [helper.make_node("Sum", ["x", "r"], ["a"]),
         helper.make_node("LayerNormalization", ["a", "gamma", "beta"], ["y"], axis=-1, epsilon=1e-6)],
        io, out, [gamma, beta])
    hio, hout = [_vi("h", [b, s, 4 * d])], [_vi("y", [b, s, 4 * d])]
    for name, approx, contrib in (("BiasGelu", "none", "BiasGelu"), ("FastGelu", "tanh", "FastGelu")):
        yield name, {"h": h}, _model(
            [helper.make_node("Add", ["h", "bias"], ["a"]), helper.make_node("Gelu", ["a"], ["y"], approximate=approx)],
            hio, hout, [wide_bias]), _model(
            [helper.make_node(contrib, ["h", "bias"], ["y"], domain="com.microsoft")], hio, hout, [wide_bias])
    w = _const("w", rng.standard_normal((d, 4 * d)) / np.sqrt(d))
    shape_in = helper.make_tensor("shape_in", TensorProto.INT64, [2], [-1, d])
    shape_out = helper.make_tensor("shape_out", TensorProto.INT64, [3], [-1, s, 4 * d])
    xio = [_vi("x", [None, s, d])]  # a symbolic batch, as jax2onnx exports it
    yield "Gemm (Reshape around)", {"x": x}, _model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "bias"], ["y"])],
        xio, [_vi("y", [None, s, 4 * d])], [w, wide_bias]), _model(
        [helper.make_node("Reshape", ["x", "shape_in"], ["x2"]), helper.make_node("Gemm", ["x2", "w", "bias"], ["y2"]),
         helper.make_node("Reshape", ["y2", "shape_out"], ["y"])], xio, [_vi("y", [None, s, 4 * d])],
        [w, wide_bias, shape_in, shape_out])
    # self-attention from one input, as jax2onnx writes it: the fused Q|K|V projection, Split,
    # ONNX Attention; against contrib Attention, which projects and attends in one kernel
    wqkv = _const("wqkv", rng.standard_normal((d, 3 * d)) / np.sqrt(d))
    bqkv = _const("bqkv", rng.standard_normal(3 * d))
    split = helper.make_tensor("split", TensorProto.INT64, [3], [d, d, d])
    yield "Attention (packed QKV)", {"x": x}, _model(
        [helper.make_node("MatMul", ["x", "wqkv"], ["m"]), helper.make_node("Add", ["m", "bqkv"], ["a"]),
         helper.make_node("Split", ["a", "split"], ["q", "k", "v"], axis=-1),
         helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=heads, kv_num_heads=heads)],
        xio, [_vi("y", [None, s, d])], [wqkv, bqkv, split]), _model(
        [helper.make_node("Attention", ["x", "wqkv", "bqkv"], ["y"], domain="com.microsoft", num_heads=heads)],
        xio, [_vi("y", [None, s, d])], [wqkv, bqkv])
    q, k, v = (rng.standard_normal((b, s, d)).astype(np.float32) for _ in range(3))
    qkv = [_vi("q", [b, s, d]), _vi("k", [b, s, d]), _vi("v", [b, s, d])]
    yield "MultiHeadAttention", {"q": q, "k": k, "v": v}, _model(
        [helper.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=heads, kv_num_heads=heads)], qkv, out, []), \
        _model([helper.make_node("MultiHeadAttention", ["q", "k", "v"], ["y"], domain="com.microsoft", num_heads=heads)],
               qkv, out, [])


def _session(model, threads, level):
    so = ort.SessionOptions()
    so.graph_optimization_level = level
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--no-optimizer", action="store_true", help="onnxruntime's graph optimizations off (raw kernels)")
    args = ap.parse_args()
    print(f"onnxruntime {ort.__version__}, batch {args.batch}, {args.tokens} tokens, width {args.width}, "
          f"{args.threads} thread(s), median of {args.runs}, graph optimizations {'off' if args.no_optimizer else 'on'}")
    for name, feeds, standard, contrib in pairs(args.batch, args.tokens, args.width, args.heads):
        onnx.checker.check_model(standard)
        level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL if args.no_optimizer else ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        a, b = _session(standard, args.threads, level), _session(contrib, args.threads, level)
        ya, yb = a.run(None, feeds)[0], b.run(None, feeds)[0]
        err = float(np.max(np.abs(ya - yb)))
        times = {"standard": [], "contrib": []}
        for i in range(args.runs):
            for key, sess in (("standard", a), ("contrib", b)) if i % 2 else (("contrib", b), ("standard", a)):
                t = time.perf_counter()
                sess.run(None, feeds)
                times[key].append(time.perf_counter() - t)
        ms = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        print(f"{name:30s} standard {ms['standard']:.4f} ms  contrib {ms['contrib']:.4f} ms  "
              f"ratio {ms['contrib'] / ms['standard']:.2f}  max|diff| {err:.2e}")


if __name__ == "__main__":
    main()

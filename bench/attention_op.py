"""onnxruntime's CPU kernel for the ONNX ``Attention`` op (opset 23) against the decomposed graph
the rewrite stage's attention rule replaces (:mod:`jax2onnx.passes.rewrite.attention`).

    python bench/attention_op.py [--batch 8] [--tokens 64] [--width 64] [--heads 4] [--kv-heads 4]
                                 [--threads 1] [--runs 200] [--optimize on|off]

Both models take q, k, v as (batch, tokens, width) and an additive float mask (batch, 1, tokens,
tokens), as Hugging Face's Flax layers hand them over; the decomposed one is the graph jax2onnx
writes for them (Reshape to heads, Transpose, MatMul, Mul by the scale, Add mask, Softmax, MatMul,
Transpose, Reshape; GQA: each key/value head repeated by Unsqueeze/Expand/Reshape). The process is
pinned to ``--threads`` cores; the two sessions run interleaved (alternating who goes first);
printed: the median wall and process-CPU microseconds of each and their ratio. Asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def _model(nodes, inits, b, s, d, dkv):
    inputs = [helper.make_tensor_value_info("q", F, [b, s, d]), helper.make_tensor_value_info("k", F, [b, s, dkv]),
              helper.make_tensor_value_info("v", F, [b, s, dkv]), helper.make_tensor_value_info("mask", F, [b, 1, s, s])]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", F, [b, s, d])],
                              initializer=[numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])


def models(b, s, d, heads, kv_heads):
    hd = d // heads
    dkv = hd * kv_heads
    scale = 1.0 / np.sqrt(hd)
    fused = _model([helper.make_node("Attention", ["q", "k", "v", "mask"], ["y"], q_num_heads=heads,
                                     kv_num_heads=kv_heads, scale=float(scale))], {}, b, s, d, dkv)
    n = helper.make_node
    inits = {"shape_q": np.array([b, s, heads, hd], np.int64), "shape_kv": np.array([b, s, kv_heads, hd], np.int64),
             "shape_out": np.array([b, s, d], np.int64), "scale": np.array(scale, np.float32)}
    nodes = [n("Reshape", ["q", "shape_q"], ["q4"]), n("Reshape", ["k", "shape_kv"], ["k4"]),
             n("Reshape", ["v", "shape_kv"], ["v4"])]
    k4, v4 = "k4", "v4"
    if kv_heads != heads:  # jnp.repeat(k, heads // kv_heads, axis=2)
        rep = heads // kv_heads
        inits.update(axis=np.array([3], np.int64), rep_shape=np.array([b, s, kv_heads, rep, hd], np.int64))
        for name in ("k4", "v4"):
            nodes += [n("Unsqueeze", [name, "axis"], [name + "u"]), n("Expand", [name + "u", "rep_shape"], [name + "e"]),
                      n("Reshape", [name + "e", "shape_q"], [name + "r"])]
        k4, v4 = "k4r", "v4r"
    nodes += [n("Mul", ["q4", "scale"], ["qs"]), n("Transpose", ["qs"], ["qt"], perm=[0, 2, 1, 3]),
              n("Transpose", [k4], ["kt"], perm=[0, 2, 3, 1]), n("MatMul", ["qt", "kt"], ["s"]),
              n("Add", ["s", "mask"], ["sm"]), n("Softmax", ["sm"], ["p"], axis=-1),
              n("Transpose", [v4], ["vt"], perm=[0, 2, 1, 3]), n("MatMul", ["p", "vt"], ["o"]),
              n("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]), n("Reshape", ["ot", "shape_out"], ["y"])]
    return {"decomposed": _model(nodes, inits, b, s, d, dkv), "Attention": fused}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--width", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=None)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--optimize", choices=("on", "off"), default="on")
    a = p.parse_args()
    kv = a.kv_heads or a.heads
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[: a.threads])
    rng = np.random.default_rng(0)
    hd = a.width // a.heads
    feeds = {"q": rng.standard_normal((a.batch, a.tokens, a.width), np.float32),
             "k": rng.standard_normal((a.batch, a.tokens, hd * kv), np.float32),
             "v": rng.standard_normal((a.batch, a.tokens, hd * kv), np.float32),
             "mask": np.where(np.tril(np.ones((a.tokens, a.tokens), bool)), 0.0, np.finfo(np.float32).min)
             .astype(np.float32)[None, None].repeat(a.batch, 0)}
    sessions = {}
    for name, model in models(a.batch, a.tokens, a.width, a.heads, kv).items():
        o = ort.SessionOptions()
        o.intra_op_num_threads, o.inter_op_num_threads = a.threads, 1
        if a.optimize == "off":
            o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sessions[name] = ort.InferenceSession(model.SerializeToString(), o, providers=["CPUExecutionProvider"])
    outs = {k: s.run(None, feeds)[0] for k, s in sessions.items()}
    print(f"max |Attention - decomposed| = {np.abs(outs['Attention'] - outs['decomposed']).max():.2e}")
    wall = {k: [] for k in sessions}
    cpu = {k: [] for k in sessions}
    names = list(sessions)
    for i in range(a.runs):
        for k in (names if i % 2 == 0 else names[::-1]):
            w, c = time.perf_counter(), time.process_time()
            sessions[k].run(None, feeds)
            cpu[k].append(time.process_time() - c)
            wall[k].append(time.perf_counter() - w)
    load = os.getloadavg()[0]
    for k in names:
        print(f"{k:11s} wall {statistics.median(wall[k]) * 1e6:9.1f} us  cpu {statistics.median(cpu[k]) * 1e6:9.1f} us")
    r = statistics.median(wall["Attention"]) / statistics.median(wall["decomposed"])
    rc = statistics.median(cpu["Attention"]) / statistics.median(cpu["decomposed"])
    print(f"Attention/decomposed: wall {r:.2f}, cpu {rc:.2f} (b={a.batch} s={a.tokens} d={a.width} heads={a.heads}/{kv} "
          f"threads={a.threads} optimize={a.optimize}; load {load:.2f})")


if __name__ == "__main__":
    main()

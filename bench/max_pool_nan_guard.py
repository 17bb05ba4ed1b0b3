"""What max pooling's NaN guard costs in onnxruntime: the same pools exported with
``max_pool_nan_guard=True`` (default: ``MaxPool`` + ``ReduceSum``/``IsNaN``/``If``, a window holding
NaN pools to NaN as in JAX) and ``False`` (the bare ``MaxPool``), run on one thread.

    python bench/max_pool_nan_guard.py [--threads 1] [--runs 200] [--cpu N]

Pools (float32):

- ``nnx.max_pool`` 2×2 stride 2 on (8, 64, 64, 32) channels-last: a lone pool, exported as
  Transpose → MaxPool → Transpose (onnxruntime runs that as its NHWC kernel when nothing sits
  between the Transposes);
- ``lax.reduce_window`` max 2×2 stride 2 and 3×3 stride 2 ``SAME`` on (8, 64, 56, 56)
  channels-first: the layout a pool has between two convolutions once their Transposes cancel;
- ``nnx.Conv`` → ``relu`` → ``max_pool`` → ``nnx.Conv`` on (8, 32, 32, 16): a pool inside a net;
- a ResNet's stem (7×7 stride-2 Conv to 64 channels, BatchNorm, relu, 3×3 stride-2 ``SAME`` pool)
  on (8, 224, 224, 3).

Each model runs on NaN-free random inputs (the guard's ``else`` branch); the guarded models also on
an input holding one NaN (the exact branch). Sessions run interleaved (alternating which goes
first), pinned to ``--cpu`` when given; printed: median and minimum milliseconds of each; the
guard's cost as a share of the bare model's time; the guard's cost as a share of the pool op
itself: both models from their MaxPool on (what computes its input cut away, the input fed), or
the whole models where the guard is one check of the model's input (no MaxPool in the main graph),
their difference over the MaxPool alone on that input; and, for scale, one ``ReduceSum`` over the
pool's input (a single read of it, the least any exact check of that input adds) over the same
MaxPool. All from the minima (on a loaded machine the medians swing with the load). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import onnxruntime as ort

# the export half (build, --save) imports jax, flax, onnx and jax2onnx where it runs; timing
# (--load) needs only onnxruntime and numpy


def cases() -> list[tuple[str, object, tuple[int, ...]]]:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    def lax_pool(window: int, padding: str):
        def pool(x):
            return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 1, window, window), (1, 1, 2, 2), padding)

        return pool

    class ConvPoolConv(nnx.Module):
        def __init__(self, rngs: nnx.Rngs):
            self.a = nnx.Conv(16, 32, (3, 3), rngs=rngs)
            self.b = nnx.Conv(32, 32, (3, 3), rngs=rngs)

        def __call__(self, x):
            return self.b(nnx.max_pool(jax.nn.relu(self.a(x)), (2, 2), (2, 2)))

    class Stem(nnx.Module):
        """A ResNet's stem: 7×7 stride-2 Conv to 64 channels, BatchNorm, relu, 3×3 stride-2 max pool."""

        def __init__(self, rngs: nnx.Rngs):
            self.conv = nnx.Conv(3, 64, (7, 7), strides=(2, 2), padding="SAME", use_bias=False, rngs=rngs)
            self.norm = nnx.BatchNorm(64, use_running_average=True, rngs=rngs)

        def __call__(self, x):
            return nnx.max_pool(jax.nn.relu(self.norm(self.conv(x))), (3, 3), (2, 2), "SAME")

    return [
        ("nnx.max_pool 2x2 NHWC (8,64,64,32)", lambda x: nnx.max_pool(x, (2, 2), (2, 2)), (8, 64, 64, 32)),
        ("reduce_window 2x2 NCHW (8,64,56,56)", lax_pool(2, "VALID"), (8, 64, 56, 56)),
        ("reduce_window 3x3 SAME NCHW (8,64,56,56)", lax_pool(3, "SAME"), (8, 64, 56, 56)),
        ("conv-relu-pool-conv NHWC (8,32,32,16)", ConvPoolConv(nnx.Rngs(0)), (8, 32, 32, 16)),
        ("ResNet stem NHWC (8,224,224,3)", Stem(nnx.Rngs(0)), (8, 224, 224, 3)),
    ]


def _session(model, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def _ops(model) -> str:
    return " ".join(n.op_type for n in model.graph.node)


def _names_read(node) -> set[str]:
    """What ``node`` (a NodeProto) reads, its branches' reads of outer values included."""
    import onnx

    names = set(node.input)
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            for inner in attr.g.node:
                names |= _names_read(inner)
    return names


def _from_the_pool(model):
    """``model`` (a ModelProto) from its MaxPool on: the pool's input becomes a graph input (what
    computes it is cut away) beside the model's inputs, which a guard's check may read; and the
    pool's input name."""
    import onnx

    (pool,) = [n for n in model.graph.node if n.op_type == "MaxPool"]
    cut = onnx.ModelProto.FromString(onnx.shape_inference.infer_shapes(model).SerializeToString())
    graph = cut.graph
    if pool.input[0] not in {i.name for i in graph.input}:
        typed = {v.name: v for v in graph.value_info}
        graph.input.append(typed[pool.input[0]])
    needed = {o.name for o in graph.output}
    kept = []
    for node in reversed(graph.node):
        if set(node.output) & needed and pool.input[0] not in node.output:
            kept.append(node)
            needed |= _names_read(node)
    del graph.node[:]
    graph.node.extend(reversed(kept))
    return cut, pool.input[0]


def _on_the_pool_input(model, op: str):
    """One node on the shape of the model's MaxPool input: the MaxPool itself (``op="MaxPool"``,
    its attributes), or ``ReduceSum`` over all of it (one read of the input: the least an exact
    NaN check of it costs)."""
    import onnx
    from onnx import helper

    (pool,) = [n for n in model.graph.node if n.op_type == "MaxPool"]
    inferred = onnx.shape_inference.infer_shapes(model)
    typed = {v.name: v for v in [*inferred.graph.input, *inferred.graph.value_info]}
    x = typed[pool.input[0]]
    attrs = {a.name: helper.get_attribute_value(a) for a in pool.attribute} if op == "MaxPool" else {"keepdims": 0}
    graph = helper.make_graph([helper.make_node(op, ["p"], ["y"], **attrs)], op,
                              [helper.make_tensor_value_info("p", x.type.tensor_type.elem_type,
                                                             [d.dim_value for d in x.type.tensor_type.shape.dim])],
                              [helper.make_tensor_value_info("y", x.type.tensor_type.elem_type, None)])
    return helper.make_model(graph, opset_imports=model.opset_import)


def _time(sessions: dict[str, tuple[ort.InferenceSession, dict]], runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in sessions}
    for s, feed in sessions.values():  # warm up
        for _ in range(3):
            s.run(None, feed)
    for r in range(runs):
        for k in (list(sessions) if r % 2 else list(reversed(sessions))):
            s, feed = sessions[k]
            t = time.perf_counter()
            s.run(None, feed)
            times[k].append(time.perf_counter() - t)
    return times


def build() -> list[dict]:
    """Each case: its models by session name (serialized), the model input ``x``, the name of the
    pool's input (what the cut models and the single-node ones read) and the ops exported."""
    import jax
    import jax.numpy as jnp
    import onnx
    from jax2onnx import to_onnx

    built = []
    rng = np.random.default_rng(0)
    for name, fn, shape in cases():
        spec = jax.ShapeDtypeStruct(shape, jnp.float32)
        guarded, bare = to_onnx(fn, [spec]), to_onnx(fn, [spec], max_pool_nan_guard=False)
        bare_cut, pool_input = _from_the_pool(bare)
        # a guard hoisted to the model's input (passes/nan_guard_hoist.py) leaves no MaxPool in the
        # main graph to cut at: its cost is the whole models' difference
        hoisted = not any(n.op_type == "MaxPool" for n in guarded.graph.node)
        guarded_cut = guarded if hoisted else _from_the_pool(guarded)[0]
        bare_cut = bare if hoisted else bare_cut
        probe = onnx.ModelProto.FromString(bare.SerializeToString())  # the bare model, the pool's input an output
        probe.graph.output.append(onnx.helper.make_tensor_value_info(pool_input, onnx.TensorProto.FLOAT, None))
        models = {"bare": bare, "guard": guarded, "bare, from the pool": bare_cut, "guard, from the pool": guarded_cut,
                  "MaxPool alone": _on_the_pool_input(bare, "MaxPool"),
                  "one read of its input": _on_the_pool_input(bare, "ReduceSum"), "probe": probe}
        built.append({"case": name, "models": {k: m.SerializeToString() for k, m in models.items()},
                      "x": rng.standard_normal(shape).astype(np.float32), "pool_input": pool_input,
                      "ops_guard": _ops(guarded), "ops_bare": _ops(bare)})
    return built


def _sessions(case: dict, threads: int) -> dict[str, tuple[ort.InferenceSession, dict]]:
    """The case's sessions to time, each with its feed: the model input ``x`` (NaN-free), the
    pool's input as the bare model computes it from ``x``, and ``x`` holding one NaN."""
    x, pool_input = case["x"], case["pool_input"]
    probe = _session(case["models"]["probe"], 1)
    p = probe.run([pool_input], {probe.get_inputs()[0].name: x})[0]
    x_nan = x.copy()
    x_nan.reshape(-1)[x.size // 3] = np.nan
    sessions = {}
    for key, model in case["models"].items():
        if key == "probe":
            continue
        s = _session(model, threads)
        sessions[key] = (s, {i.name: (p if i.name in (pool_input, "p") else x) for i in s.get_inputs()})
    guard = sessions["guard"][0]
    sessions["guard, NaN input"] = (guard, {guard.get_inputs()[0].name: x_nan})
    return sessions


def measure(built: list[dict], threads: int, runs: int) -> list[dict]:
    rows = []
    for case in built:
        times = _time(_sessions(case, threads), runs)
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        low = {k: min(v) * 1e3 for k, v in times.items()}
        rows.append({"case": case["case"], "median_ms": med, "min_ms": low, "guard_cost": low["guard"] / low["bare"] - 1,
                     "guard_of_pool": (low["guard, from the pool"] - low["bare, from the pool"]) / low["MaxPool alone"],
                     "read_of_pool": low["one read of its input"] / low["MaxPool alone"],
                     "ops_guard": case["ops_guard"], "ops_bare": case["ops_bare"]})
    return rows


def save(built: list[dict], folder: str) -> None:
    """The cases as files, to time where jax2onnx is not installed (``--load``)."""
    os.makedirs(folder, exist_ok=True)
    manifest = []
    for i, case in enumerate(built):
        entry = {k: case[k] for k in ("case", "pool_input", "ops_guard", "ops_bare")}
        entry["models"] = {}
        for j, (key, model) in enumerate(case["models"].items()):
            with open(os.path.join(folder, f"case{i}_{j}.onnx"), "wb") as f:
                f.write(model)
            entry["models"][key] = f"case{i}_{j}.onnx"
        np.save(os.path.join(folder, f"case{i}_x.npy"), case["x"])
        manifest.append(entry)
    with open(os.path.join(folder, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)


def load(folder: str) -> list[dict]:
    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    built = []
    for i, entry in enumerate(manifest):
        models = {}
        for key, file in entry.pop("models").items():
            with open(os.path.join(folder, file), "rb") as f:
                models[key] = f.read()
        built.append({**entry, "models": models, "x": np.load(os.path.join(folder, f"case{i}_x.npy"))})
    return built


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--cpu", type=int, default=None, help="pin the process to this core")
    parser.add_argument("--save", metavar="DIR", help="write the cases' models and inputs to DIR and stop")
    parser.add_argument("--load", metavar="DIR", help="time the cases --save wrote (needs only onnxruntime and numpy)")
    args = parser.parse_args()
    if args.save:
        save(build(), args.save)
        return
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    print(f"onnxruntime {ort.__version__}, {args.threads} thread(s), {args.runs} interleaved runs, "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    rows = measure(load(args.load) if args.load else build(), args.threads, args.runs)
    print("| pool | bare model ms median (min) | guarded ms median (min) | guard cost, whole model | MaxPool alone ms (min) "
          "| guard cost, share of the MaxPool | one read of its input, share of the MaxPool | guarded, NaN input ms median |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        med, low = row["median_ms"], row["min_ms"]
        print(f"| {row['case']} | {med['bare']:.3f} ({low['bare']:.3f}) | {med['guard']:.3f} ({low['guard']:.3f}) "
              f"| {row['guard_cost']:+.0%} | {low['MaxPool alone']:.3f} | {row['guard_of_pool']:+.0%} | {row['read_of_pool']:.0%} "
              f"| {med['guard, NaN input']:.3f} |")
    print()
    for row in rows:
        print(f"{row['case']}:\n  guarded: {row['ops_guard']}\n  bare:    {row['ops_bare']}")


if __name__ == "__main__":
    main()

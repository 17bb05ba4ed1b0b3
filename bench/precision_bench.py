"""Precision side by side: float32, float16, bfloat16, int8, int4 exports of a GPT-2-small-sized LM
and a ViT-B-sized encoder (random weights, built from configs), plus a tiny LM trained on a
counting language (packages/examples/tests/trained_lm.py): file size, onnxruntime CPU latency at 1 and
2 threads, accuracy against the float32 JAX model.

    python bench/precision_bench.py                 # the full sizes (GPT-2 small, ViT-B/16), ~30 min
    python bench/precision_bench.py --size medium   # full widths, 2 layers
    python bench/precision_bench.py --size smoke    # tiny models: checks the script in a minute
    python bench/precision_bench.py --json bench/results/precision.json
    python bench/precision_bench.py --conv          # int8 conv kernels: DequantizeLinear vs ConvInteger

Variants (``--variants``, comma-separated; float32 first): ``float32``, ``float16``, ``bfloat16``,
``int8`` (weight-only, the standard ``DequantizeLinear`` + ``MatMul``), ``int8 MatMulNBits`` (weight-only,
``target="onnxruntime"``: 8-bit ``MatMulNBits``), ``int8 dynamic`` (``activations="dynamic"`` under
``target="onnxruntime"``: ``DynamicQuantizeMatMul``), ``int8 MatMulInteger`` (the same, standard
``DynamicQuantizeLinear`` + ``MatMulInteger``), ``int4`` (the default: block 32 with
zero points, float32 compute, the LM head and embedding tables int4 too), ``int4 acc4``
(``accuracy_level=4``: int8 activations) and ``int4 int8-head`` (``Precision("int4",
embeddings="int8", lm_head="int8")``: int4 with the int8 head and tables of the options).

What is measured:

- bytes: the model file and its external data, against the float32 export's.
- GPT ``decode``: one generated token, the step function with a KV cache (``[layers, 1, heads,
  CACHE, head_dim]`` float32 in and out, written at ``pos`` by ``dynamic_update_slice``, attention
  masked to positions ``<= pos``), called at ``pos = CACHE // 2``; ``prefill``: the forward on 128
  tokens. ViT ``image``: one 224x224 image.
- latency: each thread count (1, 2) in a fresh process pinned to that many cores
  (``sched_setaffinity``), every variant's session loaded, runs interleaved round by round (the
  order rotates), median wall-clock ms and median process CPU ms per call (CPU time is the fair
  figure on a shared machine). The load average is printed beside the figures.
- accuracy: cosine and max abs error of the logits (GPT forward on 32 random tokens) / features
  (ViT); ``greedy``: 32 tokens generated greedily with the decode step from an 8-token prompt, the
  share equal to JAX float32's. A random-weight LM's top logits are within noise of each other, so
  its greedy figure says little; the trained tiny LM's greedy agreement (4 prompts x 32 tokens) is
  the meaningful one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

SIZES = {
    #         dim, layers, heads, mlp, vocab, ctx, image, patch
    "full": dict(lm=(768, 12, 12, 3072, 50257, 1024), vit=(768, 12, 12, 3072, 224, 16)),
    # full widths, 2 layers: the per-layer figures of the full models in a fifth of the time
    "medium": dict(lm=(768, 2, 12, 3072, 50257, 1024), vit=(768, 2, 12, 3072, 224, 16)),
    "smoke": dict(lm=(128, 2, 4, 512, 1024, 64), vit=(128, 2, 4, 512, 32, 8)),
}
#: the KV cache's length in the decode step
CACHE = 256


def variants() -> dict[str, Any]:
    from jax2onnx import Precision

    return {
        "float32": "float32",
        "float16": "float16",
        "bfloat16": "bfloat16",
        "int8": Precision("int8"),  # weight-only: DequantizeLinear + MatMul (onnxruntime fuses it into 8-bit MatMulNBits)
        "int8 MatMulNBits": (Precision("int8"), "onnxruntime"),  # weight-only, 8-bit MatMulNBits in the file
        "int8 dynamic": (Precision("int8", activations="dynamic"), "onnxruntime"),  # DynamicQuantizeMatMul
        "int8 MatMulInteger": Precision("int8", activations="dynamic"),  # DynamicQuantizeLinear + MatMulInteger
        "int4": Precision("int4"),  # block 32, zero points, float32 compute; the head and tables int4 too
        "int4 acc4": Precision("int4", accuracy_level=4),
        "int4 int8-head": Precision("int4", embeddings="int8", lm_head="int8"),  # the int8 options: head and tables
    }


def export_options(variant: Any) -> dict[str, Any]:
    """``to_onnx`` keywords of a variant: a precision, or (precision, target)."""
    precision, target = variant if isinstance(variant, tuple) else (variant, "onnx")
    return {"precision": precision, "target": target}


# ---------------------------------------------------------------------------------------------
# The models (nnx, random weights)


def build_models():
    import jax
    import jax.numpy as jnp
    from flax import nnx

    class Attention(nnx.Module):
        def __init__(self, dim, heads, *, rngs):
            self.heads = heads
            self.qkv = nnx.Linear(dim, 3 * dim, rngs=rngs)
            self.proj = nnx.Linear(dim, dim, rngs=rngs)

        def _split(self, x):
            b, t, d = x.shape
            return x.reshape(b, t, self.heads, d // self.heads).transpose(0, 2, 1, 3)

        def _attend(self, q, k, v, mask):
            scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / jnp.sqrt(q.shape[-1]).astype(q.dtype)
            weights = jax.nn.softmax(jnp.where(mask, scores, -1e9), axis=-1)
            out = jnp.einsum("bhqk,bhkd->bhqd", weights, v)
            b, h, t, hd = out.shape
            return self.proj(out.transpose(0, 2, 1, 3).reshape(b, t, h * hd))

        def __call__(self, x, causal=True):
            q, k, v = (self._split(a) for a in jnp.split(self.qkv(x), 3, axis=-1))
            t = x.shape[1]
            mask = jnp.tril(jnp.ones((t, t), bool)) if causal else jnp.ones((t, t), bool)
            return self._attend(q, k, v, mask)

        def step(self, x, pos, k_cache, v_cache):
            q, k, v = (self._split(a) for a in jnp.split(self.qkv(x), 3, axis=-1))
            k_cache = jax.lax.dynamic_update_slice(k_cache, k, (0, 0, pos, 0))
            v_cache = jax.lax.dynamic_update_slice(v_cache, v, (0, 0, pos, 0))
            mask = (jnp.arange(k_cache.shape[2]) <= pos)[None, :]
            return self._attend(q, k_cache, v_cache, mask), k_cache, v_cache

    class Block(nnx.Module):
        def __init__(self, dim, heads, mlp, *, rngs):
            self.ln1 = nnx.LayerNorm(dim, rngs=rngs)
            self.attn = Attention(dim, heads, rngs=rngs)
            self.ln2 = nnx.LayerNorm(dim, rngs=rngs)
            self.fc1 = nnx.Linear(dim, mlp, rngs=rngs)
            self.fc2 = nnx.Linear(mlp, dim, rngs=rngs)

        def mlp(self, x):
            return x + self.fc2(nnx.gelu(self.fc1(self.ln2(x))))

        def __call__(self, x, causal=True):
            return self.mlp(x + self.attn(self.ln1(x), causal))

        def step(self, x, pos, k_cache, v_cache):
            a, k_cache, v_cache = self.attn.step(self.ln1(x), pos, k_cache, v_cache)
            return self.mlp(x + a), k_cache, v_cache

    class GPT(nnx.Module):
        """GPT-2's shape: token + position embeddings, pre-LN causal blocks, final LN, LM head
        (untied: its own [dim, vocab] weight, so the model has 163 M parameters at GPT-2-small
        widths; GPT-2 ties it to the token embedding)."""

        def __init__(self, dim, layers, heads, mlp, vocab, ctx, *, rngs):
            self.heads, self.dim, self.ctx = heads, dim, ctx
            self.wte = nnx.Embed(vocab, dim, rngs=rngs)
            self.wpe = nnx.Embed(ctx, dim, rngs=rngs)
            self.blocks = nnx.List([Block(dim, heads, mlp, rngs=rngs) for _ in range(layers)])
            self.ln = nnx.LayerNorm(dim, rngs=rngs)
            self.head = nnx.Linear(dim, vocab, use_bias=False, rngs=rngs)

        def __call__(self, ids):
            x = self.wte(ids) + self.wpe(jnp.arange(ids.shape[1]))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

        def step(self, ids, pos, k_cache, v_cache):
            """One token ``ids`` ``[1, 1]`` at position ``pos``; caches ``[layers, 1, heads, CACHE, hd]``."""
            x = self.wte(ids) + self.wpe(pos[None])
            ks, vs = [], []
            for i, block in enumerate(self.blocks):
                x, k, v = block.step(x, pos, k_cache[i], v_cache[i])
                ks.append(k)
                vs.append(v)
            return self.head(self.ln(x)), jnp.stack(ks), jnp.stack(vs)

        def cache_shape(self):
            return (len(self.blocks), 1, self.heads, min(CACHE, self.ctx), self.dim // self.heads)

    class ViT(nnx.Module):
        """ViT-B's shape: conv patches, class token, position embedding, pre-LN blocks, final LN, head."""

        def __init__(self, dim, layers, heads, mlp, image, patch, *, rngs):
            self.patch = nnx.Conv(3, dim, kernel_size=(patch, patch), strides=(patch, patch), padding="VALID", rngs=rngs)
            n = (image // patch) ** 2 + 1
            self.cls = nnx.Param(jax.random.normal(jax.random.key(1), (1, 1, dim)) * 0.02)
            self.pos = nnx.Param(jax.random.normal(jax.random.key(2), (1, n, dim)) * 0.02)
            self.blocks = nnx.List([Block(dim, heads, mlp, rngs=rngs) for _ in range(layers)])
            self.ln = nnx.LayerNorm(dim, rngs=rngs)
            self.head = nnx.Linear(dim, 1000, rngs=rngs)

        def __call__(self, x):
            x = self.patch(x)
            x = x.reshape(x.shape[0], -1, x.shape[-1])
            cls = jnp.broadcast_to(self.cls[...], (x.shape[0], 1, x.shape[-1]))
            x = jnp.concatenate([cls, x], axis=1) + self.pos[...]
            for block in self.blocks:
                x = block(x, causal=False)
            return self.head(self.ln(x[:, 0]))

    return GPT, ViT


# ---------------------------------------------------------------------------------------------
# Export and accuracy (this process)


@dataclasses.dataclass
class Row:
    model: str
    variant: str
    bytes: int
    ratio: float
    cosine: float
    max_abs_error: float
    greedy_agreement: float | None = None
    latency_ms: dict[str, float] = dataclasses.field(default_factory=dict)  # "<feed> <threads>t": wall
    cpu_ms: dict[str, float] = dataclasses.field(default_factory=dict)  # the same, process CPU time
    files: dict[str, str] = dataclasses.field(default_factory=dict)  # feed name -> model path
    feed_sizes: dict[str, int] = dataclasses.field(default_factory=dict)  # decode: the position; prefill: tokens


def _size(path: str) -> int:
    folder, name = os.path.split(path)
    return sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder) if f.startswith(name))


def _session(path_or_bytes: Any, threads: int = 2):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3
    return ort.InferenceSession(path_or_bytes, opts, providers=["CPUExecutionProvider"])


def _greedy_with_cache(step, prompt, n: int, cache_shape) -> list[int]:
    """``n`` greedy tokens after ``prompt`` through ``step(ids, pos, k, v) -> logits, k, v``."""
    import numpy as np

    k = np.zeros(cache_shape, np.float32)
    v = np.zeros(cache_shape, np.float32)
    out: list[int] = []
    token = None
    for pos in range(len(prompt) + n - 1):
        token = int(prompt[pos]) if pos < len(prompt) else out[-1]
        logits, k, v = step(np.array([[token]], np.int32), np.array(pos, np.int32), k, v)
        if pos >= len(prompt) - 1:
            out.append(int(np.argmax(np.asarray(logits)[0, -1])))
    return out


def export_gpt(cfg, folder: str, names: list[str], table: dict[str, Any]) -> list[Row]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax2onnx import to_onnx
    from jax2onnx.verification.precision import cosine

    GPT, _ = build_models()
    dim, layers, heads, mlp, vocab, ctx = cfg
    model = GPT(dim, layers, heads, mlp, vocab, ctx, rngs=__import__("flax").nnx.Rngs(0))
    cache = model.cache_shape()
    rng = np.random.default_rng(0)
    reference_ids = rng.integers(0, vocab, (1, 32)).astype(np.int32)
    ref = np.asarray(jax.jit(model)(reference_ids))
    jit_step = jax.jit(model.step)
    prompt = reference_ids[0, :8]
    jax_tokens = _greedy_with_cache(lambda *a: jit_step(*a), prompt, 32, cache)
    forward_spec = jax.ShapeDtypeStruct((1, "T"), jnp.int32)
    step_specs = [jax.ShapeDtypeStruct((1, 1), jnp.int32), jax.ShapeDtypeStruct((), jnp.int32),
                  jax.ShapeDtypeStruct(cache, jnp.float32), jax.ShapeDtypeStruct(cache, jnp.float32)]
    rows, base = [], None
    for name in names:
        stem = os.path.join(folder, f"gpt-{name.replace(' ', '_')}")
        t = time.perf_counter()
        to_onnx(model, [forward_spec], output_path=f"{stem}.onnx", external_data=True, **export_options(table[name]))
        to_onnx(model.step, step_specs, output_path=f"{stem}-step.onnx", external_data=True, **export_options(table[name]))
        export_s = time.perf_counter() - t
        size = _size(f"{stem}.onnx")
        base = base or size
        sess = _session(f"{stem}.onnx")
        (got,) = sess.run(None, {sess.get_inputs()[0].name: reference_ids})
        step_sess = _session(f"{stem}-step.onnx")
        step_names = [i.name for i in step_sess.get_inputs()]
        tokens = _greedy_with_cache(lambda *a, s=step_sess: s.run(None, dict(zip(step_names, a))), prompt, 32, cache)
        del sess, step_sess
        row = Row("gpt", name, size, size / base, cosine(ref, got), float(np.max(np.abs(ref - got))),
                  float(np.mean(np.asarray(tokens) == np.asarray(jax_tokens))),
                  files={"decode": f"{stem}-step.onnx", "prefill": f"{stem}.onnx"},
                  feed_sizes={"decode": cache[3] // 2, "prefill": min(128, ctx)})
        rows.append(row)
        print(f"gpt {name:20} {size / 2**20:8.1f} MiB ({row.ratio:.3f}x) cos {row.cosine:.6f} max|err| "
              f"{row.max_abs_error:.3g} greedy {row.greedy_agreement:.2f} (export {export_s:.0f} s)", flush=True)
    return rows


def export_vit(cfg, folder: str, names: list[str], table: dict[str, Any]) -> list[Row]:
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import nnx
    from jax2onnx import to_onnx
    from jax2onnx.verification.precision import cosine

    _, ViT = build_models()
    dim, layers, heads, mlp, image, patch = cfg
    model = ViT(dim, layers, heads, mlp, image, patch, rngs=nnx.Rngs(0))
    x = np.random.default_rng(0).standard_normal((1, image, image, 3)).astype(np.float32)
    ref = np.asarray(jax.jit(model)(x))
    spec = jax.ShapeDtypeStruct(("B", image, image, 3), jnp.float32)
    rows, base = [], None
    for name in names:
        path = os.path.join(folder, f"vit-{name.replace(' ', '_')}.onnx")
        t = time.perf_counter()
        to_onnx(model, [spec], output_path=path, external_data=True, **export_options(table[name]))
        export_s = time.perf_counter() - t
        size = _size(path)
        base = base or size
        sess = _session(path)
        (got,) = sess.run(None, {sess.get_inputs()[0].name: x})
        del sess
        row = Row("vit", name, size, size / base, cosine(ref, got), float(np.max(np.abs(ref - got))),
                  files={"image": path})
        rows.append(row)
        print(f"vit {name:20} {size / 2**20:8.1f} MiB ({row.ratio:.3f}x) cos {row.cosine:.6f} max|err| "
              f"{row.max_abs_error:.3g} (export {export_s:.0f} s)", flush=True)
    return rows


def tiny_lm(names: list[str], table: dict[str, Any]) -> list[Row]:
    """The trained tiny LM: greedy agreement of 4 prompts x 32 tokens (its logits have margins)."""
    import jax
    import numpy as np
    from jax2onnx import to_onnx
    from jax2onnx.verification.precision import cosine

    sys.path.insert(0, os.path.join(ROOT, "packages", "examples", "tests"))
    import trained_lm as lm

    model, _ = lm.train()
    fn = jax.jit(lambda ids: model(ids))
    reference = [lm.greedy(lambda ids: np.asarray(fn(ids)), s, k) for s, k in lm.PROMPTS]
    ids = lm.counting(5, 2, lm.CONTEXT)[None]
    rows, base = [], None
    for name in names:
        proto = to_onnx(model, [lm.SPEC], **export_options(table[name]))
        data = proto.SerializeToString()
        base = base or len(data)
        sess = _session(data)
        input_name = sess.get_inputs()[0].name
        agreement = lm.greedy_agreement(lambda x: sess.run(None, {input_name: x})[0], reference)
        got = sess.run(None, {input_name: ids})[0]
        want = np.asarray(fn(ids))
        row = Row("tiny trained LM", name, len(data), len(data) / base, cosine(want, got), float(np.max(np.abs(want - got))),
                  agreement)
        rows.append(row)
        print(f"tiny {name:20} greedy {agreement:.2f} cos {row.cosine:.6f}", flush=True)
    return rows


def conv_kernels(repeats: int = 30) -> None:
    """Why conv="int8" widens the kernel with DequantizeLinear instead of running ConvInteger: ViT-B's
    patch convolution (3 -> 768, 16x16, stride 16, one 224x224 image) three ways, one pinned core,
    median process CPU ms per call."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((768, 3, 16, 16)) * 0.05).astype(np.float32)
    scales = (np.abs(w).reshape(768, -1).max(1) / 127).astype(np.float32)
    codes = np.clip(np.rint(w / scales[:, None, None, None]), -127, 127).astype(np.int8)
    x = rng.standard_normal((1, 3, 224, 224)).astype(np.float32)
    conv = dict(kernel_shape=[16, 16], strides=[16, 16])

    def model(nodes, inits):
        graph = helper.make_graph(nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]).SerializeToString()

    ways = {
        "float32 Conv": model([helper.make_node("Conv", ["x", "w"], ["y"], **conv)], [numpy_helper.from_array(w, "w")]),
        "int8 DequantizeLinear + Conv": model(
            [helper.make_node("DequantizeLinear", ["q", "s"], ["w"], axis=0), helper.make_node("Conv", ["x", "w"], ["y"], **conv)],
            [numpy_helper.from_array(codes, "q"), numpy_helper.from_array(scales, "s")]),
        "int8 DynamicQuantizeLinear + ConvInteger": model(
            [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("ConvInteger", ["xq", "q", "xz"], ["yi"], **conv),
             helper.make_node("Cast", ["yi"], ["yf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["xs", "s"], ["scale"]), helper.make_node("Mul", ["yf", "scale"], ["y"])],
            [numpy_helper.from_array(codes, "q"), numpy_helper.from_array(scales.reshape(1, 768, 1, 1), "s")]),
    }
    reference = None
    for name, data in ways.items():
        sess = _session(data, 1)
        y = sess.run(None, {"x": x})[0]
        reference = y if reference is None else reference
        times = []
        for _ in range(repeats):
            t = time.process_time()
            sess.run(None, {"x": x})
            times.append(time.process_time() - t)
        cos = float((y * reference).sum() / np.linalg.norm(y) / np.linalg.norm(reference))
        print(f"conv {name:42} {statistics.median(times) * 1e3:6.2f} ms CPU  cosine {cos:.6f}  "
              f"{len(data) / 2**20:.2f} MiB (load {os.getloadavg()[0]:.1f})", flush=True)


# ---------------------------------------------------------------------------------------------
# Latency (a fresh process per thread count, pinned)


def _feeds(path: str, size: int) -> dict[str, Any]:
    import numpy as np

    sess_inputs = _session(path, 1).get_inputs()
    rng = np.random.default_rng(1)
    feeds = {}
    for i in sess_inputs:
        shape = [d if isinstance(d, int) else size for d in i.shape]
        if i.type == "tensor(int32)" and not shape:
            feeds[i.name] = np.array(size, np.int32)  # the decode position
        elif i.type == "tensor(int32)":
            feeds[i.name] = rng.integers(0, 1000, shape).astype(np.int32)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def latency_worker(threads: int, jobs_path: str, budget_s: float, min_runs: int) -> None:
    """Runs in the pinned child: every (label, path, feed) of the jobs file, interleaved."""
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])
    with open(jobs_path, encoding="utf-8") as f:
        jobs = json.load(f)
    runners = {}
    for label, path, size in jobs:
        sess = _session(path, threads)
        feeds = _feeds(path, size)
        sess.run(None, feeds)  # warm-up
        runners[label] = (sess, feeds)
    wall: dict[str, list[float]] = {k: [] for k in runners}
    cpu: dict[str, list[float]] = {k: [] for k in runners}
    order = list(runners)
    start, rounds = time.perf_counter(), 0
    while rounds < min_runs or (time.perf_counter() - start < budget_s and rounds < 200):
        for label in order:
            sess, feeds = runners[label]
            w, c = time.perf_counter(), time.process_time()
            sess.run(None, feeds)
            cpu[label].append(time.process_time() - c)
            wall[label].append(time.perf_counter() - w)
        order = order[1:] + order[:1]
        rounds += 1
    print("BENCH_RESULT " + json.dumps({k: [statistics.median(wall[k]) * 1e3, statistics.median(cpu[k]) * 1e3]
                                        for k in runners}), flush=True)


def measure_latency(rows: list[Row], folder: str, budget_s: float, min_runs: int) -> str:
    loads = []
    for model in sorted({r.model for r in rows if r.files}):
        jobs = [[f"{r.variant}|{feed}", path, r.feed_sizes.get(feed, 1)] for r in rows if r.model == model
                for feed, path in r.files.items()]
        jobs_path = os.path.join(folder, f"jobs-{model}.json")
        with open(jobs_path, "w", encoding="utf-8") as f:
            json.dump(jobs, f)
        for threads in (1, 2):
            loads.append(os.getloadavg()[0])
            proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--latency-worker", str(threads), jobs_path,
                                   str(budget_s), str(min_runs)], capture_output=True, text=True)
            if proc.returncode:
                raise RuntimeError(f"the latency worker failed:\n{proc.stderr[-3000:]}")
            out = proc.stdout
            result = json.loads(next(line for line in out.splitlines() if line.startswith("BENCH_RESULT "))[13:])
            for r in rows:
                if r.model != model:
                    continue
                for feed in r.files:
                    wall_ms, cpu_ms = result[f"{r.variant}|{feed}"]
                    r.latency_ms[f"{feed} {threads}t"] = wall_ms
                    r.cpu_ms[f"{feed} {threads}t"] = cpu_ms
            print(f"latency {model} {threads} thread(s) done (load {os.getloadavg()[0]:.1f})", flush=True)
    return f"{min(loads):.1f}-{max(loads):.1f}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--latency-worker":
        latency_worker(int(argv[1]), argv[2], float(argv[3]), int(argv[4]))
        return 0
    if argv and argv[0] == "--conv":
        conv_kernels()
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--models", default="gpt,vit,tiny")
    parser.add_argument("--variants", default="float32,float16,bfloat16,int8,int8 MatMulNBits,int8 dynamic,int8 MatMulInteger,int4,"
                                                  "int4 acc4,int4 int8-head")
    parser.add_argument("--budget", type=float, default=20.0, help="seconds of interleaved latency rounds per model and thread count")
    parser.add_argument("--min-runs", type=int, default=5)
    parser.add_argument("--json", default=None)
    parser.add_argument("--workdir", default=None, help="where the exported files go while the bench runs (default: the temp folder)")
    args = parser.parse_args(argv)
    table = variants()
    names = [v for v in args.variants.split(",") if v]
    unknown = [n for n in names if n not in table]
    if unknown or names[:1] != ["float32"]:
        parser.error(f"--variants: start with float32 (the baseline); known: {', '.join(table)}; unknown: {unknown}")
    cfg = SIZES[args.size]
    models = args.models.split(",")
    rows: list[Row] = []
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=args.workdir) as folder:
        if "gpt" in models:
            rows += export_gpt(cfg["lm"], folder, names, table)
        if "vit" in models:
            rows += export_vit(cfg["vit"], folder, names, table)
        load = measure_latency(rows, folder, args.budget, args.min_runs)
    if "tiny" in models:
        rows += tiny_lm(names, table)
    import onnxruntime as ort

    for r in rows:
        lat = "  ".join(f"{k} {v:.2f} ms (cpu {r.cpu_ms[k]:.2f})" for k, v in r.latency_ms.items())
        print(f"{r.model:16} {r.variant:20} {r.ratio:.3f}x  {lat}")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"size": args.size, "onnxruntime": ort.__version__, "load_average": f"{load_before:.1f}, latency {load}",
                       "cpus": os.cpu_count(), "rows": [dataclasses.asdict(r) for r in rows]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

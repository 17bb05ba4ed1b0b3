"""GPU bench: ``to_onnx(..., target="tensorrt")`` exports built into TensorRT engines, and onnxruntime's
CUDA and TensorRT sessions, against JAX-jit on the same GPU.

    python bench/tensorrt_bench.py [--models transformer_x4_d256,vit_tiny,bert_base_encoder,gpt2_small]
                                   [--batch 8] [--fp16] [--runs 200] [--out-dir bench/results]

NOT RUN YET: written on a machine without a GPU (the session that wrote it had none lent). It has
been checked only for what runs without one (the export per model, ``--dry-run``); the first run on a
GPU machine may need small fixes. ``nox -s bench_tensorrt`` runs it in a fresh environment.

Needs, on a machine with an NVIDIA GPU: ``tensorrt`` (10.x, the Python wheel), ``cuda-python``
(``cuda.bindings.runtime``, for device buffers and a stream), ``onnxruntime-gpu`` (CUDA and TensorRT
execution providers) and ``jax[cuda12]``. A side whose package is missing is reported as such and
the others still run.

Per model (bench/models.py): one export with ``target="tensorrt"`` (the file must pass
``jax2onnx check --target tensorrt``; an export the target refuses is a result, not a crash), then
- ``trt``: TensorRT's ONNX parser + builder (an optimization profile fixing every symbolic dim at
  ``--batch``; FP16 allowed with ``--fp16``), engine build time and size, then the engine run with
  ``execute_async_v3`` on one stream, inputs copied once, outputs left on the device;
- ``ort_cuda`` / ``ort_trt``: onnxruntime sessions with the CUDA / TensorRT execution provider,
  inputs bound on the device with IO binding;
- ``jax``: ``jax.jit`` of the model on the GPU, ``block_until_ready`` inside the timed region.
Each side: warmup, then ``--runs`` interleaved rounds (the order rotates), median and p90 latency
(GPU-synchronised wall clock), and the max |difference| of its outputs from JAX's. Writes
OUT_DIR/tensorrt.md and tensorrt.json; asserts nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import models  # noqa: E402

DEFAULT_MODELS = "transformer_x4_d256,vit_tiny,bert_base_encoder,gpt2_small"


def export(name: str, folder: str) -> dict:
    from jax2onnx import to_onnx
    from jax2onnx.passes.rewrite import rewrites_applied
    from jax2onnx.targets.tensorrt.lint import check_tensorrt

    spec = models.MODELS[name]
    path = os.path.join(folder, f"{name}.tensorrt.onnx")
    try:
        with models.x64(spec.double):
            proto = to_onnx(spec.build(), spec.specs(), model_name=name, target="tensorrt", output_path=path,
                            external_data=spec.big)
    except Exception as exc:  # noqa: BLE001 - a refused export is a result
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:400]}
    return {"ok": True, "path": path, "nodes": len(proto.graph.node), "rewrites": rewrites_applied(proto),
            "lint": [str(f) for f in check_tensorrt(proto)]}


# ------------------------------------------------------------------------------------------- sides


def trt_engine(path: str, arrays: list[np.ndarray], fp16: bool) -> tuple[Callable[[], Any], Callable[[], list], dict]:
    """A TensorRT engine for ``path`` with every input's shape fixed to ``arrays``'s: (run, outputs, info)."""
    import tensorrt as trt
    from cuda.bindings import runtime as cudart

    def check(result):
        err = result[0] if isinstance(result, tuple) else result
        if int(err) != 0:
            raise RuntimeError(f"CUDA runtime error {err}")
        return result[1] if isinstance(result, tuple) and len(result) > 1 else None

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # TensorRT 10: explicit batch is the only mode
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(path):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise RuntimeError(f"TensorRT's ONNX parser refused the file: {errors[:500]}")
    config = builder.create_builder_config()
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    profile = builder.create_optimization_profile()
    for i, array in enumerate(arrays):
        tensor = network.get_input(i)
        profile.set_shape(tensor.name, array.shape, array.shape, array.shape)
    config.add_optimization_profile(profile)
    t0 = time.perf_counter()
    serialized = builder.build_serialized_network(network, config)
    build_s = time.perf_counter() - t0
    if serialized is None:
        raise RuntimeError("TensorRT could not build an engine (its log above says why)")
    engine = trt.Runtime(logger).deserialize_cuda_engine(serialized)
    context = engine.create_execution_context()
    stream = check(cudart.cudaStreamCreate())
    buffers, outputs = {}, []
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    inputs = iter(arrays)
    for name in names:
        if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
            host = np.ascontiguousarray(next(inputs))
            context.set_input_shape(name, host.shape)
            ptr = check(cudart.cudaMalloc(host.nbytes))
            check(cudart.cudaMemcpy(ptr, host.ctypes.data, host.nbytes, cudart.cudaMemcpyKind.cudaMemcpyHostToDevice))
            buffers[name] = ptr
    for name in names:
        if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
            shape = tuple(context.get_tensor_shape(name))
            dtype = np.dtype(trt.nptype(engine.get_tensor_dtype(name)))
            host = np.empty(shape, dtype)
            buffers[name] = check(cudart.cudaMalloc(max(host.nbytes, 1)))
            outputs.append((name, host))
    for name, ptr in buffers.items():
        context.set_tensor_address(name, int(ptr))

    def run() -> None:
        context.execute_async_v3(int(stream))
        check(cudart.cudaStreamSynchronize(stream))

    def fetch() -> list:
        for name, host in outputs:
            check(cudart.cudaMemcpy(host.ctypes.data, buffers[name], host.nbytes,
                                    cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost))
        return [host.copy() for _, host in outputs]

    return run, fetch, {"build_s": build_s, "engine_mib": serialized.nbytes / 2**20}


def ort_session(path: str, arrays: list[np.ndarray], provider: str, fp16: bool) -> tuple[Callable, Callable, dict]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    provider_options = {"trt_fp16_enable": fp16} if provider == "TensorrtExecutionProvider" else {}
    t0 = time.perf_counter()
    session = ort.InferenceSession(path, options, providers=[(provider, provider_options)])
    if session.get_providers()[0] != provider:
        raise RuntimeError(f"onnxruntime has no {provider} here (providers: {ort.get_available_providers()})")
    binding = session.io_binding()
    for meta, array in zip(session.get_inputs(), arrays, strict=True):
        binding.bind_ortvalue_input(meta.name, ort.OrtValue.ortvalue_from_numpy(array, "cuda", 0))
    for meta in session.get_outputs():
        binding.bind_output(meta.name, "cuda")
    session.run_with_iobinding(binding)  # the first run builds TensorRT's engines in the TensorRT provider
    setup_s = time.perf_counter() - t0

    def run() -> None:
        session.run_with_iobinding(binding)
        binding.synchronize_outputs()

    return run, lambda: binding.copy_outputs_to_cpu(), {"setup_s": setup_s}


def jax_side(name: str, arrays: list[np.ndarray]) -> tuple[Callable, Callable, dict]:
    import jax
    import jax.numpy as jnp

    spec = models.MODELS[name]
    if jax.default_backend() != "gpu":
        raise RuntimeError(f"JAX runs on {jax.default_backend()}, not a GPU (install jax[cuda12])")
    fn = spec.build()
    jitted = jax.jit(lambda *xs: fn(*xs))
    device_args = [jnp.asarray(a) for a in arrays]
    state: dict = {}

    def run() -> None:
        state["out"] = jax.block_until_ready(jitted(*device_args))

    def fetch() -> list:
        run()
        return [np.asarray(o) for o in jax.tree_util.tree_leaves(state["out"])]

    return run, fetch, {}


# --------------------------------------------------------------------------------------------- run


def measure(name: str, path: str, args: argparse.Namespace) -> dict:
    spec = models.MODELS[name]
    batch = spec.batch or args.batch
    arrays = models.make_inputs(spec, batch, seed=3)
    makers = {"trt": lambda: trt_engine(path, arrays, args.fp16),
              "ort_cuda": lambda: ort_session(path, arrays, "CUDAExecutionProvider", args.fp16),
              "ort_trt": lambda: ort_session(path, arrays, "TensorrtExecutionProvider", args.fp16),
              "jax": lambda: jax_side(name, arrays)}
    sides, result = {}, {"batch": batch, "sides": {}}
    for side, make in makers.items():
        try:
            run, fetch, info = make()
            sides[side] = (run, fetch)
            result["sides"][side] = {"ok": True, **info}
        except Exception as exc:  # noqa: BLE001 - a missing package or a refusal is a result
            result["sides"][side] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:400]}
    reference = sides["jax"][1]() if "jax" in sides else None
    times: dict[str, list[float]] = {side: [] for side in sides}
    for run, _ in sides.values():
        for _ in range(args.warmup):
            run()
    order = list(sides)
    for i in range(args.runs):
        for side in order[i % len(order):] + order[:i % len(order)]:
            t0 = time.perf_counter()
            sides[side][0]()
            times[side].append(time.perf_counter() - t0)
    for side, (_, fetch) in sides.items():
        rec = result["sides"][side]
        ts = sorted(times[side])
        rec["median_ms"] = statistics.median(ts) * 1e3
        rec["p90_ms"] = ts[int(0.9 * (len(ts) - 1))] * 1e3
        if reference is not None and side != "jax":
            outs = fetch()
            rec["max_abs_diff"] = max(float(np.max(np.abs(np.asarray(o, np.float64) - np.asarray(r, np.float64))))
                                      for o, r in zip(outs, reference, strict=True))
    return result


def render(results: dict) -> str:
    meta = results["meta"]
    lines = [f"# TensorRT target on a GPU ({meta['date']}, {meta['gpu']})", "",
             f"`python bench/tensorrt_bench.py {' '.join(meta['argv'])}`; median / p90 ms per call, "
             "GPU-synchronised; max |diff| from JAX's outputs.", "",
             "| model | nodes | rewrites | side | batch | median ms | p90 ms | / JAX | max abs diff | setup |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, entry in results["models"].items():
        conv = entry["export"]
        if not conv["ok"]:
            lines.append(f"| {name} | export refused: {conv['error'].replace('|', '/')} | | | | | | | | |")
            continue
        rewrites = ", ".join(f"{k} {v}" for k, v in conv["rewrites"].items()) or "none"
        if not entry["sides"]:
            lint = "; ".join(conv["lint"]) or "clean"
            lines.append(f"| {name} | {conv['nodes']} | {rewrites} | (not run) | {entry['batch']} | | | | | lint: {lint} |")
            continue
        jax_ms = entry["sides"].get("jax", {}).get("median_ms")
        for side, rec in entry["sides"].items():
            if not rec.get("ok"):
                lines.append(f"| {name} | {conv['nodes']} | {rewrites} | {side} | | failed: "
                             f"{rec['error'].replace('|', '/')} | | | | |")
                continue
            ratio = f"{rec['median_ms'] / jax_ms:.2f}" if jax_ms else "–"
            setup = (f"build {rec['build_s']:.1f} s, {rec['engine_mib']:.0f} MiB" if "build_s" in rec
                     else f"{rec['setup_s']:.1f} s" if "setup_s" in rec else "")
            diff = f"{rec['max_abs_diff']:.2g}" if "max_abs_diff" in rec else "–"
            lines.append(f"| {name} | {conv['nodes']} | {rewrites} | {side} | {entry['batch']} | {rec['median_ms']:.3f} "
                         f"| {rec['p90_ms']:.3f} | {ratio} | {diff} | {setup} |")
    return "\n".join(lines) + "\n"


def _gpu_name() -> str:
    try:
        import jax

        return ", ".join(d.device_kind for d in jax.devices("gpu"))
    except Exception:  # noqa: BLE001
        return "no GPU found"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default=DEFAULT_MODELS)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--fp16", action="store_true", help="let TensorRT pick FP16 kernels (outputs then differ more)")
    p.add_argument("--runs", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    p.add_argument("--dry-run", action="store_true", help="exports and the lint only (no GPU needed)")
    args = p.parse_args(argv)
    names = [n for n in args.models.split(",") if n]
    unknown = [n for n in names if n not in models.MODELS]
    if unknown:
        p.error(f"unknown model(s) {unknown}; known: {sorted(models.MODELS)}")
    results: dict = {"meta": {"date": datetime.datetime.now().isoformat(timespec="seconds"), "argv": list(argv or sys.argv[1:]),
                              "gpu": "dry run" if args.dry_run else _gpu_name()}, "models": {}}
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            conv = export(name, folder)
            entry = {"export": {k: v for k, v in conv.items() if k != "path"}, "sides": {},
                     "batch": models.MODELS[name].batch or args.batch}
            if conv["ok"] and not args.dry_run:
                entry.update(measure(name, conv["path"], args))
            results["models"][name] = entry
            print(f"{name}: {json.dumps(entry)[:400]}", flush=True)
    text = render(results)
    if not args.dry_run:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "tensorrt.json"), "w") as f:
            json.dump(results, f, indent=1)
        with open(os.path.join(args.out_dir, "tensorrt.md"), "w") as f:
            f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

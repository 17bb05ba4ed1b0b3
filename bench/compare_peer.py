"""Side-by-side benchmark: our converter vs the peer (jax2onnx 0.17.1 from PyPI, same import name).

    python bench/compare_peer.py [--peer-python PATH] [--models mlp,cnn] [--batch 8] [--runs 300]

Run it with the interpreter that has our packages (``nox -s bench`` or /work/venv/bin/python). The
peer needs its own environment because both are imported as ``jax2onnx``: ``--peer-python``
(default /work/venv-peer/bin/python); when that interpreter does not exist a venv is created at
bench/.peer-venv with ``pip install jax2onnx==0.17.1`` (jax/flax pinned to ours where possible).

Steps, one model failing never stops the others:
1. conversion: ``convert_worker.py`` in a fresh process per (model, converter): cold time (import
   jax2onnx + first to_onnx, plugin loading included), warm time (a second to_onnx), peak RSS;
2. startup: ``import jax2onnx`` as the first import + first conversion of the MLP, minus ``import
   jax`` alone, each in fresh processes;
3. in this one process: both ONNX files in onnxruntime (CPU, same session options), same inputs,
   warmup, then interleaved A/B runs (alternating who goes first), median latency; each output vs
   JAX (max abs diff), including masked-attention inputs with huge masked logits and with fully
   masked rows; node counts (main graph; total with function bodies and subgraphs expanded).

Writes bench/results/results.md and results.json. Not a test: nothing here asserts timings.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "convert_worker.py")
LATENCY_WORKER = os.path.join(HERE, "latency_worker.py")
MARKER = "BENCH_RESULT "
DEFAULT_PEER_PYTHON = "/work/venv-peer/bin/python"
PEER_VENV = os.path.join(HERE, ".peer-venv")
PEER_REQUIREMENT = "jax2onnx==0.17.1"
SIDES = ("ours", "peer")

sys.path.insert(0, HERE)
import models  # noqa: E402
from graph_counts import count_nodes  # noqa: E402


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ------------------------------------------------------------------------------------ environments


def ensure_peer_python(path: str) -> str | None:
    """The peer's interpreter: the given one, else bench/.peer-venv (created on first use)."""
    if os.path.exists(path):
        return os.path.abspath(path)  # the workers run with cwd=bench/
    venv_python = os.path.join(PEER_VENV, "bin", "python")
    if not os.path.exists(venv_python):
        log(f"{path} not found: creating {PEER_VENV} with {PEER_REQUIREMENT}")
        try:
            subprocess.run([sys.executable, "-m", "venv", PEER_VENV], check=True)
            import flax
            import jax

            pinned = [PEER_REQUIREMENT, f"jax=={jax.__version__}", f"flax=={flax.__version__}"]
            pip = [venv_python, "-m", "pip", "install", "-q"]
            if subprocess.run([*pip, *pinned]).returncode != 0:
                log("pinned install failed (the peer may need other jax/flax versions): unpinned")
                subprocess.run([*pip, PEER_REQUIREMENT], check=True)
        except (subprocess.CalledProcessError, OSError) as exc:
            log(f"could not set up the peer's venv: {exc}")
            return None
    return venv_python


def run_worker(python: str, args: list[str], timeout: float) -> dict:
    """One fresh worker process; its BENCH_RESULT line, or a record of how it failed."""
    cmd = [python, WORKER, *args]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=HERE)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"worker timed out after {timeout:.0f} s", "cmd": cmd}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARKER)]
    if not lines:
        tail = (proc.stderr or proc.stdout or "")[-1500:]
        return {"ok": False, "error": f"worker exited {proc.returncode} without a result: {tail}", "cmd": cmd}
    result = json.loads(lines[-1][len(MARKER):])
    result["t_worker_wall"] = time.perf_counter() - t0
    return result


# --------------------------------------------------------------------------------------- analysis


def check_model(path: str) -> str:
    import onnx

    try:
        onnx.checker.check_model(path, full_check=True)
        return "ok"
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc)[:300]}"


def max_abs_diff(outs: list[np.ndarray], refs: list[np.ndarray]) -> tuple[float, bool, str]:
    """(largest |onnx - jax| over all outputs, within tolerance?, note)."""
    if len(outs) != len(refs):
        return math.inf, False, f"{len(outs)} outputs, JAX has {len(refs)}"
    worst, ok, notes = 0.0, True, []
    for o, r in zip(outs, refs, strict=True):
        o = np.asarray(o)
        if o.shape != r.shape:
            return math.inf, False, f"shape {o.shape} vs JAX {r.shape}"
        if o.dtype != r.dtype:
            notes.append(f"dtype {o.dtype} vs JAX {r.dtype}")
        diff = np.abs(o.astype(np.float64) - r.astype(np.float64))
        worst = max(worst, float(np.nanmax(diff)) if diff.size else 0.0)
        if np.isnan(diff).any():
            worst, ok = math.nan, False
            notes.append("NaN")
            continue
        rtol, atol = (1e-7, 1e-9) if r.dtype == np.float64 else (1e-3, 1e-4)
        ok &= bool(np.allclose(o, r, rtol=rtol, atol=atol))
    return worst, ok, "; ".join(notes)


def make_session(path: str, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def feed(session: Any, arrays: list[np.ndarray]) -> dict:
    names = [i.name for i in session.get_inputs()]
    if len(names) != len(arrays):
        raise ValueError(f"the graph has {len(names)} inputs, the model takes {len(arrays)}")
    return dict(zip(names, arrays, strict=True))


def ratio(a: Any, b: Any) -> float | None:
    if a is None or b is None or not b or (isinstance(a, float) and math.isnan(a)):
        return None
    return a / b


def evaluate(name: str, conv: dict, args: argparse.Namespace) -> dict:
    """Node counts, checker, correctness vs JAX, and latency for one model's ONNX files."""
    import onnx

    spec = models.MODELS[name]
    entry: dict = {"nodes": {}, "checker": {}, "correctness": {}, "latency": {}, "errors": {}}
    paths = {side: conv[side].get("onnx_path") for side in SIDES if conv.get(side, {}).get("ok")}
    sessions = {}
    for side, path in paths.items():
        try:
            entry["nodes"][side] = count_nodes(onnx.load(path))
            entry["checker"][side] = check_model(path)
            sessions[side] = make_session(path, args.threads[0])
        except Exception as exc:
            entry["errors"][side] = f"onnxruntime load: {type(exc).__name__}: {str(exc)[:500]}"
    if not sessions:
        return entry

    fn = spec.build()
    for case in ("random", *spec.cases):
        arrays = models.make_inputs(spec, spec.batch or args.batch, seed=1, case=case)
        refs = models.reference(spec, fn, arrays)
        entry["correctness"][case] = {}
        for side, s in sessions.items():
            try:
                outs = s.run(None, feed(s, arrays))
                diff, ok, note = max_abs_diff(outs, refs)
                entry["correctness"][case][side] = {"max_abs_diff": diff, "ok": ok, "note": note}
            except Exception as exc:
                entry["correctness"][case][side] = {"max_abs_diff": None, "ok": False,
                                                    "note": f"{type(exc).__name__}: {str(exc)[:300]}"}
    runnable = {side: paths[side] for side in sessions if entry["correctness"]["random"][side]["max_abs_diff"] is not None}
    for target in args.targets:  # ours again, tuned for another runtime (to_onnx(target=...)): the target column
        if target == "generic" or "ours" not in runnable:
            continue
        side = f"ours_{target}"
        try:
            path = export_target(name, target, os.path.dirname(runnable["ours"]))
            entry["nodes"][side] = count_nodes(onnx.load(path))
            entry["checker"][side] = check_model(path)
            arrays = models.make_inputs(spec, spec.batch or args.batch, seed=1)
            session = make_session(path, 1)
            outs = session.run(None, feed(session, arrays))
            diff, ok, note = max_abs_diff(outs, models.reference(spec, spec.build(), arrays))
            entry["correctness"]["random"][side] = {"max_abs_diff": diff, "ok": ok, "note": note}
            runnable[side] = path
        except Exception as exc:
            entry["errors"][side] = f"target={target}: {type(exc).__name__}: {str(exc)[:500]}"
    del sessions, fn  # the latency workers load their own copies (big models: keep one copy in memory)
    entry["latency_by_threads"] = {}
    for threads in args.threads:
        entry["latency_by_threads"][str(threads)] = latency_worker(name, runnable, threads, args)
    first = entry["latency_by_threads"].get(str(args.threads[0]), {})
    entry["latency"] = {k: v for k, v in first.get("latency", {}).items() if k in SIDES}
    return entry


def export_target(name: str, target: str, folder: str) -> str:
    """Our export of ``name`` for ``target`` (this process has our jax2onnx), as a file in ``folder``."""
    from jax2onnx import to_onnx

    spec = models.MODELS[name]
    path = os.path.join(folder, f"{name}.ours_{target}.onnx")
    with models.x64(spec.double):
        to_onnx(spec.build(), spec.specs(), model_name=spec.name, opset=23, enable_double_precision=spec.double,
                target=target, output_path=path)
    return path


def latency_worker(name: str, paths: dict, threads: int, args: argparse.Namespace) -> dict:
    """ORT (each side's file) against JAX-jit at ``threads`` threads, in a fresh process (latency_worker.py)."""
    spec = models.MODELS[name]
    batch = spec.batch or args.batch
    min_runs = 5 if spec.big else 20
    sides = dict(paths)
    if threads > 1 and "ours" in paths:  # diagnostic: our graph without onnxruntime's spin-waiting
        sides["ours_nospin"] = paths["ours"]
    cmd = [sys.executable, LATENCY_WORKER, name, str(threads), str(batch), str(args.latency_budget),
           str(min_runs), str(args.runs), *(f"{side}={path}" for side, path in sides.items())]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=HERE)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"latency worker timed out after {args.timeout:.0f} s"}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(MARKER)]
    if not lines:
        return {"ok": False, "error": f"latency worker exited {proc.returncode}: {(proc.stderr or '')[-800:]}"}
    return json.loads(lines[-1][len(MARKER):])


def startup(sides: dict, args: argparse.Namespace) -> dict:
    """`import jax2onnx` (first import) + first conversion, minus `import jax` alone: medians, wall and CPU."""
    out: dict = {}
    for side, python in sides.items():
        runs: dict[str, list[float]] = {"jax": [], "jax_cpu": [], "full": [], "full_cpu": []}
        errors = []
        for _ in range(args.startup_repeats):
            jax_only = run_worker(python, ["--import-jax"], args.timeout)
            full = run_worker(python, ["--startup", args.startup_model], args.timeout)
            if jax_only.get("ok"):
                runs["jax"].append(jax_only["t_import_jax"])
                runs["jax_cpu"].append(jax_only["cpu_import_jax"])
            if full.get("ok"):
                runs["full"].append(full["t_import_and_first_conversion"])
                runs["full_cpu"].append(full["cpu_import_and_first_conversion"])
            else:
                errors.append(full.get("error", "?"))
        rec: dict = {"model": args.startup_model, "runs": args.startup_repeats, "errors": errors[:1]}
        if runs["jax"] and runs["full"]:
            med = {k: statistics.median(v) for k, v in runs.items()}
            rec.update({
                "t_import_jax": med["jax"],
                "t_import_jax2onnx_and_first_conversion": med["full"],
                "overhead_s": med["full"] - med["jax"],
                "cpu_import_jax": med["jax_cpu"],
                "cpu_import_jax2onnx_and_first_conversion": med["full_cpu"],
                "overhead_cpu_s": med["full_cpu"] - med["jax_cpu"],
            })
        out[side] = rec
    return out


# ---------------------------------------------------------------------------------------- reports


def _fmt(v: Any, spec: str = ".3g") -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, float) and math.isinf(v):
        return "inf"
    return format(v, spec)


def _pair(results: dict, name: str, getter: Any, spec: str = ".3g") -> tuple[str, str, str]:
    vals = []
    for side in SIDES:
        try:
            vals.append(getter(results["models"][name], side))
        except (KeyError, TypeError):
            vals.append(None)
    return _fmt(vals[0], spec), _fmt(vals[1], spec), _fmt(ratio(vals[0], vals[1]), ".2f")


def render_markdown(results: dict) -> str:
    meta = results["meta"]
    lines = [
        "# jax2onnx (ours) vs jax2onnx 0.17.1 (peer)",
        "",
        f"- Generated {meta['date']} by `{meta['command']}` in {meta['wall_s']:.0f} s, at commit {meta['git']} "
        "(`-dirty`: with uncommitted changes in the working tree).",
        f"- Ours: {meta['versions'].get('ours', '?')}; peer: {meta['versions'].get('peer', '?')}; "
        f"onnxruntime {meta['onnxruntime']}, Python {meta['python']}, "
        f"{meta['cpus']} CPUs ({meta['platform']}), load average {meta['loadavg_start']} at start, "
        f"{meta['loadavg_end']} at the end.",
        f"- Latency: `latency_worker.py`, a fresh process per thread count ({meta['threads']}): onnxruntime CPU "
        "(intra-op threads = T, one inter-op thread) for ours and the peer, and `jax.jit` of the same function "
        "(XLA_FLAGS intra_op_parallelism_threads=T, no multi-threaded Eigen at T=1), same inputs; batch "
        f"{meta['batch']} unless the model fixes its own (big models: 1); 3 warmup runs, then interleaved runs "
        "(rotating order) for the latency budget, median wall clock and median process CPU time (all threads). "
        "Ratios ours/peer and ours/JAX-jit: below 1, ours is faster. At more than one thread, onnxruntime's "
        "default pool spin-waits between ops and process CPU time counts that; the no-spin column is our graph "
        "again with `session.intra_op.allow_spinning=0` (a diagnostic, not a user default).",
        "- Conversion: fresh process per model and converter; cold = `import jax2onnx` + first `to_onnx` "
        "(jax and flax already imported, model built), warm = a second `to_onnx`; CPU = process CPU time "
        "(all threads; less distorted than wall time when the machine is shared); peak RSS = the worker "
        "process's maximum resident set during the first `to_onnx` (the peak is restarted just before it via "
        "/proc/self/clear_refs; jax, flax and the model included); converter's RSS = that peak minus the peak "
        "before `import jax2onnx`; peak RSS increase = that peak minus the RSS just before `to_onnx`, over the "
        "model's parameter bytes. Big models (gpt2_small, linear_300m) convert once: no warm figure.",
    ]
    busiest = max(float(x) for x in (meta["loadavg_start"] + " " + meta["loadavg_end"]).split())
    if busiest > (meta["cpus"] or 1):
        lines.append(f"- **The machine was busy (load up to {busiest:.1f} on {meta['cpus']} CPUs): wall-clock "
                     "times are inflated and noisy; the CPU-time columns and the ratios are the fairer figures.**")
    lines += [
        "",
        "## Graph size and conversion (proto export, first `to_onnx` in a fresh process)",
        "",
        "| model | params MB | nodes total (ours / peer) | convert s (ours / peer) | convert CPU s (ours / peer) | ratio CPU "
        "| peak RSS increase / param bytes (ours / peer) | peak RSS increase MiB (ours / peer) |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def conv(key: str) -> Any:
        return lambda m, s: m["convert"][s].get(key) if m["convert"][s]["ok"] else None

    for name, m in results["models"].items():
        pb = next((m["convert"][s].get("param_bytes") for s in SIDES if m["convert"][s].get("param_bytes")), None)
        total = _pair(results, name, lambda m, s: m["eval"]["nodes"][s]["total"], "d")
        first = _pair(results, name, conv("t_convert_first"))
        first_cpu = _pair(results, name, conv("cpu_convert_first"))
        # Below 10 MB of weights the increase is the converter's fixed cost (imports, IR objects), and a
        # ratio to the weights says nothing: the MiB column stands alone there.
        per = (_pair(results, name, conv("rss_increase_per_param_byte"), ".2f") if pb and pb >= 10e6
               else ("–", "–", "–"))
        inc = _pair(results, name, conv("rss_increase_to_onnx_mib"), ".0f")
        lines.append(f"| {name} | {_fmt(pb / 1e6 if pb else None, '.1f')} | {total[0]} / {total[1]} "
                     f"| {first[0]} / {first[1]} | {first_cpu[0]} / {first_cpu[1]} | {first_cpu[2]} "
                     f"| {per[0]} / {per[1]} | {inc[0]} / {inc[1]} |")
    lines += [
        "",
        "## Inference latency: onnxruntime (ours, peer) vs JAX-jit",
        "",
        "Ours once per `target=` (`--targets`): generic (standard ONNX) and onnxruntime (tuned for its "
        "kernels), both in the same interleaved run as the peer and JAX-jit.",
        "",
        "| model | target | threads | batch | wall µs ours / peer / JAX | CPU µs ours / peer / JAX | ours/peer CPU "
        "| ours/JAX CPU | ours/JAX wall | ours no-spin: CPU µs, /JAX CPU | runs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    targets = meta.get("targets", ["generic"])
    for name, m in results["models"].items():
        for threads, rec in m.get("eval", {}).get("latency_by_threads", {}).items():
            if not rec.get("ok"):
                lines.append(f"| {name} | | {threads} | | {rec.get('error', '?')[:200].replace('|', '/')} | | | | | | |")
                continue
            lat = rec["latency"]
            for target in targets:
                ours = "ours" if target == "generic" else f"ours_{target}"
                if ours not in lat:
                    continue

                def get(side: str, key: str, lat: dict = lat, ours: str = ours) -> Any:
                    return lat.get(ours if side == "ours" else side, {}).get(key)

                walls = " / ".join(_fmt(get(s, "median_us"), ".0f") for s in ("ours", "peer", "jax"))
                nospin = "–"
                if target == "generic" and get("ours_nospin", "cpu_median_us") is not None:
                    nospin = (f"{_fmt(get('ours_nospin', 'cpu_median_us'), '.0f')}, "
                              f"{_fmt(ratio(get('ours_nospin', 'cpu_median_us'), get('jax', 'cpu_median_us')), '.2f')}")
                cpus = " / ".join(_fmt(get(s, "cpu_median_us"), ".0f") for s in ("ours", "peer", "jax"))
                lines.append(
                    f"| {name} | {target} | {threads} | {rec['batch']} | {walls} | {cpus} "
                    f"| {_fmt(ratio(get('ours', 'cpu_median_us'), get('peer', 'cpu_median_us')), '.2f')} "
                    f"| {_fmt(ratio(get('ours', 'cpu_median_us'), get('jax', 'cpu_median_us')), '.2f')} "
                    f"| {_fmt(ratio(get('ours', 'median_us'), get('jax', 'median_us')), '.2f')} "
                    f"| {nospin} "
                    f"| {get('ours', 'runs')}{' (note)' if rec.get('note') else ''} |")
    notes = [(name, t, rec["note"]) for name, m in results["models"].items()
             for t, rec in m.get("eval", {}).get("latency_by_threads", {}).items() if rec.get("note")]
    lines += [""] + [f"- note, {name} at {t} thread(s): {note}" for name, t, note in notes] if notes else []
    lines += [
        "",
        "## Conversion cost in detail",
        "",
        "| model | cold s (ours / peer) | ratio | cold CPU s (ours / peer) | ratio | warm s (ours / peer) | ratio "
        "| warm CPU s (ours / peer) | ratio | peak RSS MiB (ours / peer) | ratio | converter's RSS MiB (ours / peer) "
        "| ratio |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]

    for name in results["models"]:
        cold = _pair(results, name, conv("t_cold"))
        cold_cpu = _pair(results, name, conv("cpu_cold"))
        warm = _pair(results, name, conv("t_convert_warm"))
        warm_cpu = _pair(results, name, conv("cpu_convert_warm"))
        rss = _pair(results, name, conv("rss_peak_mib"), ".0f")
        own = _pair(results, name, conv("rss_converter_mib"), ".0f")
        lines.append(f"| {name} | {cold[0]} / {cold[1]} | {cold[2]} | {cold_cpu[0]} / {cold_cpu[1]} | {cold_cpu[2]} "
                     f"| {warm[0]} / {warm[1]} | {warm[2]} | {warm_cpu[0]} / {warm_cpu[1]} | {warm_cpu[2]} "
                     f"| {rss[0]} / {rss[1]} | {rss[2]} | {own[0]} / {own[1]} | {own[2]} |")
    st = results.get("startup", {})
    if st:
        lines += [
            "",
            f"## Startup: `import jax2onnx` (as the first import) + first conversion of `{results['meta']['startup_model']}`, "
            "minus `import jax` alone",
            "",
            "| | import jax s | import jax2onnx + first conversion s | overhead s | overhead CPU s |",
            "|---|---|---|---|---|",
        ]
        for side in SIDES:
            rec = st.get(side, {})
            note = f" ({rec['errors'][0][:120]})" if rec.get("errors") else ""
            lines.append(f"| {side} | {_fmt(rec.get('t_import_jax'))} | "
                         f"{_fmt(rec.get('t_import_jax2onnx_and_first_conversion'))} | "
                         f"{_fmt(rec.get('overhead_s'))} | {_fmt(rec.get('overhead_cpu_s'))}{note} |")
        o = ratio(st.get("ours", {}).get("overhead_s"), st.get("peer", {}).get("overhead_s"))
        oc = ratio(st.get("ours", {}).get("overhead_cpu_s"), st.get("peer", {}).get("overhead_cpu_s"))
        lines.append(f"\nOverhead ratio ours/peer: {_fmt(o, '.2f')} wall, {_fmt(oc, '.2f')} CPU "
                     f"(median of {meta['startup_repeats']} run(s)).")
    lines += [
        "",
        "## Correctness vs JAX (max abs diff; ✓ within rtol 1e-3/atol 1e-4, f64: 1e-7/1e-9)",
        "",
        "| model | case | ours | peer |",
        "|---|---|---|---|",
    ]
    for name, m in results["models"].items():
        cases = m.get("eval", {}).get("correctness", {}) or {"random": {}}
        for case, per_side in cases.items():
            cells = []
            for side in SIDES:
                rec = per_side.get(side)
                if rec is None:
                    cells.append("not converted" if not m["convert"][side].get("ok") else "–")
                else:
                    mark = "✓" if rec["ok"] else "✗"
                    note = f" ({rec['note']})" if rec.get("note") else ""
                    cells.append(f"{mark} {_fmt(rec['max_abs_diff'])}{note}")
            lines.append(f"| {name} | {case} | {cells[0]} | {cells[1]} |")
    failures = [(name, side, m["convert"][side].get("error", ""))
                for name, m in results["models"].items() for side in SIDES if not m["convert"][side].get("ok")]
    failures += [(name, side, f"{err}") for name, m in results["models"].items()
                 for side, err in m.get("eval", {}).get("errors", {}).items()]
    failures += [(name, side, f"onnx.checker: {msg}") for name, m in results["models"].items()
                 for side, msg in m.get("eval", {}).get("checker", {}).items() if msg != "ok"]
    if failures:
        lines += ["", "## Failures", "", "| model | converter | error |", "|---|---|---|"]
        for name, side, err in failures:
            first = err.splitlines()[0] if err else "?"
            lines.append(f"| {name} | {side} | {first[:300].replace('|', '/')} |")
    lines += _stream_section()
    lines += ["", "Models: " + "; ".join(f"`{n}`: {models.MODELS[n].description}" for n in results["models"]), ""]
    return "\n".join(lines)


def _stream_section() -> list[str]:
    """The last ``stream_big.py`` run (``nox -s bench_stream``), when there is one: its own file, its own run."""
    path = os.path.join(HERE, "results", "stream_big.json")
    try:
        with open(path, encoding="utf-8") as f:
            r = json.load(f)
        return [
            "",
            "## Streamed export from a safetensors file (`stream_big.py`, a separate run: results/stream_big.json)",
            "",
            f"{r['param_gb']:.2f} GB of float32 weights ({r['layers']} layers {r['dim']}x{r['dim']}), `Weights(abstract, "
            f"file)` + `output_path` with external data: peak RSS increase during `to_onnx` "
            f"{r['peak_rss_increase_mib']:.0f} MiB (target: largest tensor {r['largest_tensor_mib']:.0f} MiB + 256 MiB = "
            f"{r['target_increase_mib']:.0f} MiB), exporting process's peak {r['peak_rss_process_mib']:.0f} MiB "
            f"(target {r['target_process_mib']} MiB); {r['export_s']:.0f} s wall, {r['export_cpu_s']:.0f} s CPU "
            f"(of the wall time, {r['digest_s']:.0f} s hashing the written weights file for its name); max |onnxruntime - JAX| "
            f"{r['max_abs_diff_vs_jax']:.2g} (JAX computed layer by layer).",
        ]
    except (OSError, KeyError, ValueError, TypeError):
        return []


def _json_safe(obj: Any) -> Any:
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_json_safe(v) for v in obj]
    return obj


def write_atomic(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------------- main


def merge(paths: list[str], out_dir: str) -> int:
    """One report from several runs' results.json: models in the given order, meta from the first run, with
    every run's command, wall time and load averages listed."""
    runs = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            runs.append(json.load(f))
    merged: dict = {"models": {}, "meta": dict(runs[0]["meta"])}
    for run in runs:
        merged["models"].update(run["models"])
    meta = merged["meta"]
    meta["command"] = " ; ".join(r["meta"]["command"] for r in runs) + " ; python bench/compare_peer.py --merge " + " ".join(paths)
    meta["wall_s"] = max(r["meta"]["wall_s"] for r in runs)
    meta["loadavg_start"] = " ".join(r["meta"]["loadavg_start"] for r in runs)
    meta["loadavg_end"] = " ".join(r["meta"]["loadavg_end"] for r in runs)
    meta["merged_runs"] = [r["meta"] for r in runs]
    os.makedirs(out_dir, exist_ok=True)
    write_atomic(os.path.join(out_dir, "results.json"), json.dumps(_json_safe(merged), indent=1) + "\n")
    write_atomic(os.path.join(out_dir, "results.md"), render_markdown(merged))
    log(f"merged {len(runs)} run(s): {out_dir}/results.md")
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--peer-python", default=DEFAULT_PEER_PYTHON)
    p.add_argument("--models", default=",".join(models.MODELS), help="comma-separated subset")
    p.add_argument("--batch", type=int, default=8, help="value of every symbolic dim for latency/correctness")
    p.add_argument("--runs", type=int, default=300, help="max interleaved latency runs per model")
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--latency-budget", type=float, default=4.0, help="seconds of latency runs per model")
    p.add_argument("--threads", default="1,2",
                   help="comma-separated intra-op thread counts (onnxruntime and XLA alike), one latency worker each")
    p.add_argument("--targets", default="generic,onnxruntime",
                   help="comma-separated to_onnx(target=...) values for our side (the latency table's target column)")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per worker process")
    p.add_argument("--startup-model", default="mlp")
    p.add_argument("--startup-repeats", type=int, default=1, help="0 skips the startup measurement")
    p.add_argument("--out-dir", default=os.path.join(HERE, "results"))
    p.add_argument("--onnx-dir", default=None, help="where the converted models go (default: a temp dir)")
    p.add_argument("--merge", nargs="+", default=None, metavar="RESULTS_JSON",
                   help="no run: combine the models of earlier runs' results.json (e.g. subsets run side by side) "
                        "into OUT_DIR/results.md and .json; the first file's meta heads the table")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.threads = [int(t) for t in str(args.threads).split(",") if t.strip()]
    args.targets = [t for t in str(args.targets).split(",") if t.strip()]
    if args.merge:
        return merge(args.merge, args.out_dir)
    started = time.perf_counter()
    loadavg = os.getloadavg()
    names = [n.strip() for n in args.models.split(",") if n.strip()]
    unknown = [n for n in names if n not in models.MODELS]
    if unknown:
        print(f"unknown models {unknown}; known: {list(models.MODELS)}", file=sys.stderr)
        return 2
    sides = {"ours": sys.executable}
    peer = ensure_peer_python(args.peer_python)
    if peer is not None:
        sides["peer"] = peer
    onnx_dir = args.onnx_dir or tempfile.mkdtemp(prefix="jax2onnx-bench-")
    os.makedirs(onnx_dir, exist_ok=True)
    os.makedirs(args.out_dir, exist_ok=True)

    results: dict = {"models": {}}
    for i, name in enumerate(names):
        conv = {}
        order = list(sides) if i % 2 == 0 else list(sides)[::-1]
        for side in order:
            out = os.path.join(onnx_dir, f"{name}.{side}.onnx")
            conv[side] = run_worker(sides[side], [name, out], args.timeout)
            status = f"{conv[side].get('t_cold', 0):.2f} s cold" if conv[side].get("ok") else conv[side].get("error", "")[:160]
            log(f"convert {name} [{side}]: {status}")
        for side in SIDES:
            conv.setdefault(side, {"ok": False, "error": "no peer interpreter"})
        try:
            ev = evaluate(name, conv, args)
        except Exception as exc:
            ev = {"errors": {"bench": f"{type(exc).__name__}: {exc}"}}
        results["models"][name] = {"convert": conv, "eval": ev}
        lat = ev.get("latency", {})
        log(f"evaluate {name}: " + ", ".join(f"{s} {v['median_us']:.0f} µs" for s, v in lat.items()))

    if args.startup_repeats > 0:
        log(f"startup: import jax2onnx + first conversion of {args.startup_model}, x{args.startup_repeats}")
        results["startup"] = startup(sides, args)

    import flax
    import jax
    import onnxruntime

    versions = {}
    for side in sides:
        done = [m["convert"][side] for m in results["models"].values() if m["convert"][side].get("converter")]
        versions[side] = f"{done[0]['converter']} (jax {done[0]['jax']})" if done else "?"

    git = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, cwd=HERE)
    results["meta"] = {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "git": git.stdout.strip() if git.returncode == 0 else "?",
        "command": "python bench/compare_peer.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "wall_s": time.perf_counter() - started,
        "versions": versions,
        "interpreters": sides,
        "jax": jax.__version__,
        "flax": flax.__version__,
        "onnxruntime": onnxruntime.__version__,
        "python": platform.python_version(),
        "platform": platform.machine(),
        "cpus": os.cpu_count(),
        "loadavg_start": " ".join(f"{x:.1f}" for x in loadavg),
        "loadavg_end": " ".join(f"{x:.1f}" for x in os.getloadavg()),
        "threads": args.threads,
        "targets": args.targets,
        "batch": args.batch,
        "warmup": args.warmup,
        "runs": args.runs,
        "startup_model": args.startup_model,
        "startup_repeats": args.startup_repeats,
        "onnx_dir": onnx_dir,
    }
    results["meta"]["command"] = results["meta"]["command"].strip()
    write_atomic(os.path.join(args.out_dir, "results.json"), json.dumps(_json_safe(results), indent=1) + "\n")
    md = render_markdown(results)
    write_atomic(os.path.join(args.out_dir, "results.md"), md)
    print(md)
    log(f"done in {time.perf_counter() - started:.0f} s: {args.out_dir}/results.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())

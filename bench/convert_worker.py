"""Convert one benchmark model with whichever jax2onnx this interpreter has; print one JSON line.

    python bench/convert_worker.py MODEL OUT.onnx      # timings of one conversion run
    python bench/convert_worker.py --startup MODEL      # import jax2onnx FIRST (pulls in jax) + convert
    python bench/convert_worker.py --import-jax         # import jax alone (the baseline for --startup)

Meant to run in a fresh process (compare_peer.py starts one per measurement), under either venv:
ours (jax2onnx-core + packs) or the peer (jax2onnx 0.17.1 from PyPI). The result is the last stdout
line, prefixed with ``BENCH_RESULT``. A failed conversion is a result (``ok: false`` with the
error), not a crash. Timings are wall-clock ``perf_counter`` seconds; memory is the process's peak
RSS (VmHWM, falling back to ``ru_maxrss``), in MiB. Each
timing also has a CPU-time twin (``cpu_*``, ``process_time``: all threads of the process), which
a busy shared machine distorts much less than wall time.
"""

from __future__ import annotations

import time

_T_START = time.perf_counter()

import json  # noqa: E402
import os  # noqa: E402
import resource  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402

MARKER = "BENCH_RESULT "


def _peak_rss_mib() -> float:
    """This process's peak resident set. On Linux from /proc (VmHWM belongs to the address space made
    by exec): ``ru_maxrss`` survives exec, so it would report the parent's peak when that is larger."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux: KiB, macOS: bytes (not used)


def _rss_mib() -> float | None:
    """This process's current resident set (VmRSS), in MiB."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Restart VmHWM at the current RSS (Linux: writing 5 to clear_refs), so that the next peak read is
    the peak of what follows alone, not of model building or imports before it."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _emit(result: dict) -> None:
    sys.stdout.flush()
    print(MARKER + json.dumps(result), flush=True)


def _converter_version() -> str:
    from importlib import metadata

    for dist in ("jax2onnx-core", "jax2onnx"):
        try:
            return f"{dist} {metadata.version(dist)}"
        except metadata.PackageNotFoundError:
            continue
    return "unknown"


def _error(exc: BaseException) -> dict:
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    message = f"{type(exc).__name__}: {exc}"
    return {"error": message[:2000], "traceback_tail": "".join(tb)[-3000:]}


def _convert(to_onnx, spec, fn):
    """One to_onnx call with the same arguments for both converters (proto back, no file write)."""
    from models import x64

    with x64(spec.double):
        specs = spec.specs()
    return to_onnx(fn, specs, model_name=spec.name, opset=23, enable_double_precision=spec.double)


def run_conversion(model: str, out_path: str) -> dict:
    result: dict = {"mode": "convert", "model": model, "python": sys.executable, "ok": False}
    t0 = time.perf_counter()
    import jax  # noqa: F401
    import numpy  # noqa: F401
    from flax import nnx  # noqa: F401

    result["t_import_jax_flax"] = time.perf_counter() - t0

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import models

    spec = models.MODELS[model]
    t0 = time.perf_counter()
    fn = spec.build()
    result["t_build_model"] = time.perf_counter() - t0
    result["rss_before_converter_mib"] = _peak_rss_mib()

    t0, c0 = time.perf_counter(), time.process_time()
    import jax2onnx
    from jax2onnx import to_onnx

    result["t_import_jax2onnx"] = time.perf_counter() - t0
    result["cpu_import_jax2onnx"] = time.process_time() - c0
    result["converter"] = _converter_version()
    result["jax"] = jax.__version__
    del jax2onnx

    result["param_bytes"] = models.param_bytes(fn)
    try:
        # Memory of one proto export: current RSS just before to_onnx against the peak during it.
        result["rss_before_to_onnx_mib"] = _rss_mib()
        peak_reset = _reset_peak_rss()
        t0, c0 = time.perf_counter(), time.process_time()
        proto = _convert(to_onnx, spec, fn)
        result["t_convert_first"] = time.perf_counter() - t0
        result["cpu_convert_first"] = time.process_time() - c0
        result["t_cold"] = result["t_import_jax2onnx"] + result["t_convert_first"]
        result["cpu_cold"] = result["cpu_import_jax2onnx"] + result["cpu_convert_first"]
        result["rss_after_first_mib"] = _peak_rss_mib()
        if peak_reset and result["rss_before_to_onnx_mib"] is not None:
            result["rss_increase_to_onnx_mib"] = result["rss_after_first_mib"] - result["rss_before_to_onnx_mib"]
            if result["param_bytes"]:
                result["rss_increase_per_param_byte"] = (
                    result["rss_increase_to_onnx_mib"] * 2**20 / result["param_bytes"])
        if not spec.big:  # a second, warm conversion (a big model's would double the bench's time)
            t0, c0 = time.perf_counter(), time.process_time()
            proto = _convert(to_onnx, spec, fn)
            result["t_convert_warm"] = time.perf_counter() - t0
            result["cpu_convert_warm"] = time.process_time() - c0
    except Exception as exc:  # a failed conversion is a data point
        result.update(_error(exc))
        result["rss_peak_mib"] = _peak_rss_mib()
        return result

    result["rss_peak_mib"] = _peak_rss_mib()
    result["rss_converter_mib"] = result["rss_peak_mib"] - result["rss_before_converter_mib"]
    import onnx

    try:
        onnx.save(proto, out_path)
    except Exception as exc:
        result.update(_error(exc))
        return result
    result["onnx_path"] = os.path.abspath(out_path)
    result["onnx_bytes"] = os.path.getsize(out_path)
    result["ok"] = True
    return result


def run_startup(model: str) -> dict:
    """`import jax2onnx` as the first import (it pulls in jax itself), then the first conversion."""
    result: dict = {"mode": "startup", "model": model, "python": sys.executable, "ok": False}
    t0, c0 = time.perf_counter(), time.process_time()
    from jax2onnx import to_onnx

    result["t_import_jax2onnx_with_jax"] = time.perf_counter() - t0
    result["cpu_import_jax2onnx_with_jax"] = time.process_time() - c0
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    t0 = time.perf_counter()
    import models

    spec = models.MODELS[model]
    fn = spec.build()
    result["t_build_model"] = time.perf_counter() - t0  # not part of the converter's cost
    try:
        t0, c0 = time.perf_counter(), time.process_time()
        _convert(to_onnx, spec, fn)
        result["t_convert_first"] = time.perf_counter() - t0
        result["cpu_convert_first"] = time.process_time() - c0
    except Exception as exc:
        result.update(_error(exc))
        return result
    result["t_import_and_first_conversion"] = result["t_import_jax2onnx_with_jax"] + result["t_convert_first"]
    result["cpu_import_and_first_conversion"] = result["cpu_import_jax2onnx_with_jax"] + result["cpu_convert_first"]
    result["ok"] = True
    return result


def run_import_jax() -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    import jax
    import jax.numpy  # noqa: F401

    return {"mode": "import_jax", "python": sys.executable, "ok": True, "jax": jax.__version__,
            "t_import_jax": time.perf_counter() - t0, "cpu_import_jax": time.process_time() - c0}


def main(argv: list[str]) -> int:
    if argv[:1] == ["--import-jax"]:
        result = run_import_jax()
    elif argv[:1] == ["--startup"] and len(argv) == 2:
        result = run_startup(argv[1])
    elif len(argv) == 2:
        result = run_conversion(argv[0], argv[1])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    result["t_process_total"] = time.perf_counter() - _T_START
    _emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

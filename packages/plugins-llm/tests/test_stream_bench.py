"""bench/llm_stream_big.py at its smoke size: the script behind `nox -s bench_7b` / `bench_llm_stream`
runs end to end (a bfloat16 source widened on read, int4, onnxruntime-genai generating) and logs
the export's progress, so the 7 B run does not fail an hour in on a broken harness."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from llm_test_helpers import require_genai

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "..", "bench", "llm_stream_big.py")


def test_stream_bench_smoke_size_runs_and_logs_progress(tmp_path):
    require_genai()
    out = tmp_path / "result.json"
    proc = subprocess.run([sys.executable, BENCH, "--size", "smoke", "--precision", "int4", "--source-dtype", "bfloat16",
                           "--new-tokens", "4", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert "error" not in result["export"] and "error" not in result["generate"], result
    assert result["write"]["source_dtype"] == "bfloat16"
    export = result["export"]
    assert 0 < export["peak_rss_increase_mib"] <= export["peak_rss_export_mib"] <= export["peak_rss_process_mib"]
    tokens = result["generate"]["tokens"]
    assert len(tokens) == 4 and all(0 <= t < result["config"]["vocab_size"] for t in tokens)
    # the export ran with progress=True, its stderr not a terminal: plain stage lines, echoed by the bench
    for line in ("jax2onnx: trace ...", "jax2onnx: write ...", "jax2onnx: genai_config.json ..."):
        assert line in proc.stderr.splitlines()
    assert "tensors, " in proc.stderr

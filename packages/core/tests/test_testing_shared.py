"""jax2onnx.testing.built_once: a fixture's value made once for the processes sharing a folder."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from jax2onnx.testing import built_once
from jax2onnx.testing import shared as testing_shared

pytest.importorskip("fcntl")

_WORKER = textwrap.dedent("""
    import importlib.util, sys, time
    from pathlib import Path

    # the module alone (it imports only the standard library): no jax import per process
    spec = importlib.util.spec_from_file_location("shared", sys.argv[3])
    shared = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shared)

    def build(root):
        with open(Path(sys.argv[2]) / "builds.log", "a") as log:
            log.write("built\\n")
        time.sleep(0.5)  # long enough for the other process to reach the lock
        (root / "model.onnx").write_text("exported")
        return {"tokens": [1, 2, 3]}

    root, value = shared.built_once("export", build, sys.argv[1])
    print(root, value["tokens"], (root / "model.onnx").read_text())
""")


def test_two_processes_build_once_and_both_read_the_folder_and_value(tmp_path):
    shared, logs = tmp_path / "session", tmp_path / "logs"
    shared.mkdir()
    logs.mkdir()
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    workers = [subprocess.Popen([sys.executable, str(script), str(shared), str(logs), testing_shared.__file__], stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    outputs = [w.communicate(timeout=120)[0].split() for w in workers]
    assert all(w.returncode == 0 for w in workers)
    assert (logs / "builds.log").read_text() == "built\n"
    assert outputs[0] == outputs[1] == [str(shared / "built-export" / "out"), "[1,", "2,", "3]", "exported"]
    assert not list(shared.glob("*.partial"))


def test_a_build_that_raises_leaves_nothing_and_the_next_caller_builds(tmp_path):
    def failing(root):
        (root / "half.onnx").write_text("half")
        raise RuntimeError("export failed")

    with pytest.raises(RuntimeError, match="export failed"):
        built_once("model", failing, tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["built-model.lock"]
    root, value = built_once("model", lambda root: (root / "m.onnx").write_text("whole") and "made", tmp_path)
    assert value == "made" and (root / "m.onnx").read_text() == "whole"
    assert sorted(p.name for p in root.iterdir()) == ["m.onnx"]


def test_without_a_shared_folder_each_call_builds_in_its_own_folder():
    calls = []
    first = built_once("x", lambda root: calls.append(root) or len(calls), None)
    second = built_once("x", lambda root: calls.append(root) or len(calls), None)
    assert [first[1], second[1]] == [1, 2] and first[0] != second[0] and all(p.is_dir() for p in calls)

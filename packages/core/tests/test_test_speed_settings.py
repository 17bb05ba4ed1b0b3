"""The settings that make the testcase suite cheaper reach what they configure: the ini option's
XLA flags are in XLA_FLAGS before the first conftest is imported (a user's own value of a flag
wins), and the runner's comparisons run onnxruntime on one thread."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import onnxruntime
from jax2onnx.testing import Testcase, run_variant, variants_of
from jax2onnx.testing.pytest_plugin import with_xla_flags


def test_with_xla_flags_adds_only_flags_the_variable_does_not_name():
    assert with_xla_flags("", ["--a=1", "--b=2"]) == "--a=1 --b=2"
    assert with_xla_flags("--b=5 --c", ["--a=1", "--b=2"]) == "--b=5 --c --a=1"
    assert with_xla_flags("--a=1", ["--a=1"]) == "--a=1"  # an xdist worker inherits them: no duplicates


_INI = """[pytest]
addopts = -p no:cacheprovider
jax2onnx_xla_flags = --xla_cpu_use_fusion_emitters=false --xla_backend_optimization_level=0
"""

# Asserted at import: the conftest is where a test directory could first touch JAX.
_CONFTEST = """import os
FLAGS_AT_CONFTEST = os.environ.get("XLA_FLAGS", "")
"""

_TEST = """import os
from conftest import FLAGS_AT_CONFTEST


def test_flags_are_set_before_conftests():
    assert FLAGS_AT_CONFTEST.split() == {expected!r}
"""


def _run(tmp_path, env_flags, expected):
    (tmp_path / "pytest.ini").write_text(_INI, encoding="utf-8")
    (tmp_path / "conftest.py").write_text(_CONFTEST, encoding="utf-8")
    (tmp_path / "test_flags.py").write_text(_TEST.format(expected=expected), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    if env_flags is not None:
        env["XLA_FLAGS"] = env_flags
    proc = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_ini_xla_flags_are_in_the_environment_before_conftests(tmp_path):
    out = _run(tmp_path, None, ["--xla_cpu_use_fusion_emitters=false", "--xla_backend_optimization_level=0"])
    assert "jax2onnx: XLA_FLAGS=--xla_cpu_use_fusion_emitters=false" in out  # the header says what the run used


def test_a_flag_the_user_set_keeps_its_value(tmp_path):
    _run(tmp_path, "--xla_backend_optimization_level=2",
         ["--xla_backend_optimization_level=2", "--xla_cpu_use_fusion_emitters=false"])


def test_the_runner_compares_with_onnxruntime_on_one_thread(mini_registry, monkeypatch):
    threads = []
    real = onnxruntime.InferenceSession

    def recording(model, opts=None, *args, **kwargs):
        threads.append(opts.intra_op_num_threads)
        return real(model, opts, *args, **kwargs)

    monkeypatch.setattr(onnxruntime, "InferenceSession", recording)
    case = Testcase("sin", lambda x: jax.numpy.sin(x), [("B", 3)], run_f64=False)
    for variant in variants_of(case):
        run_variant(variant)
    assert threads == [1, 1, 1]  # static at one size, symbolic at two

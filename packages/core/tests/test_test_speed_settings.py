"""The settings that make the testcase suite cheaper reach what they configure: the ini option's
XLA flags are in XLA_FLAGS before the first conftest is imported (a user's own value of a flag
wins), and the runner's comparisons run onnxruntime on one thread."""

from __future__ import annotations

import os
import subprocess
import sys

import jax
import onnxruntime
import pytest
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
    # one session per exported model, on one thread: the static variant's, and the symbolic one's
    # for both of its input sizes (a session each was most of onnxruntime's share of a testcase)
    assert threads == [1, 1]


def test_the_opsets_of_a_variant_share_one_trace_and_one_jax_reference(mini_registry, monkeypatch):
    """`--jax2onnx-opset=default,17,13` runs a variant three times; JAX's side, the most expensive
    part of a variant, is computed once for the three, and so is the trace (each input set once,
    shared by the static and the symbolic variant too)."""
    import dataclasses

    from jax2onnx.export import program as program_module
    from jax2onnx.testing import runner

    computed, traced = [], []
    real = runner.jax_expected
    real_trace = program_module.trace

    def counting(fn, arrays, *args, **kwargs):
        computed.append([a.shape for a in arrays])
        return real(fn, arrays, *args, **kwargs)

    monkeypatch.setattr(runner, "jax_expected", counting)
    monkeypatch.setattr(program_module, "trace", lambda *a: traced.append(1) or real_trace(*a))
    case = Testcase("cos_shared", lambda x: jax.numpy.cos(x), [("B", 3)], run_f64=False)
    (static, symbolic) = variants_of(case)
    checked = []
    real_check = runner.export_and_check_structure
    monkeypatch.setattr(runner, "export_and_check_structure",
                        lambda v, *a: checked.append(runner.model_opset(real_check(v, *a))) or real_check(v, *a))
    result = runner.run_variant(dataclasses.replace(static, more_opsets=(17, 13)))
    assert result.max_abs_diff[0] < 1e-6 and checked[1:] == [17, 13] and len(checked) == 3
    assert len(computed) == 1 and len(traced) == 1
    runner.run_variant(dataclasses.replace(symbolic, more_opsets=(17, 13)))
    # one trace; of the symbolic variant's two sizes only the one the static variant lacks: its
    # inputs at the static size are the static variant's (runner.DEFAULT_STATIC_SIZE)
    assert computed == [[(runner.DEFAULT_STATIC_SIZE, 3)], [(2, 3)]] and len(traced) == 2


def test_a_program_shares_its_trace_only_where_tracing_is_the_same(mini_registry):
    import numpy as np
    from jax2onnx import ExportProgram

    first = ExportProgram(lambda x: jax.numpy.sin(x) * 2, [(3,)], opset=23)
    older = first.with_options(opset=17)
    assert older.traced is first.traced and older.options.opset == 17
    assert first.model_proto.opset_import[0].version == 23 and older.model_proto.opset_import[0].version == 17
    x64 = first.with_options(enable_double_precision=True)
    assert x64.traced is None  # a change tracing reads traces anew
    with pytest.raises(Exception, match="opset"):
        first.with_options(opset=5)  # checked as ever
    import onnxruntime as ort
    x = np.arange(3, dtype=np.float32)
    got = ort.InferenceSession(older.model_proto.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {
        older.model_proto.graph.input[0].name: x})[0]
    np.testing.assert_allclose(got, np.sin(x) * 2, rtol=1e-6)


def test_the_opset_option_takes_a_comma_list():
    import argparse

    from jax2onnx.testing.pytest_plugin import _opsets_option

    assert _opsets_option("17") == (17,)
    assert _opsets_option("default,17,13") == (None, 17, 13)
    for bad, says in (("12", "outside"), ("17,17", "twice"), ("newest", "'default'")):
        with pytest.raises(argparse.ArgumentTypeError, match=says):
            _opsets_option(bad)

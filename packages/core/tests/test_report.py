"""The export report: per-output errors over two sizes per symbolic dim, and the model summary."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import onnx
from jax2onnx import ExportReport, to_onnx, verify
from jax2onnx.verification.report import summarize, trial_inputs


def _fn(x, w):
    return jnp.sin(x) @ w, (x * x).sum(axis=1)


SPECS = [("B", 4), (4, 3)]


def test_report_matches_and_names_outputs(mini_registry, tmp_path):
    path = tmp_path / "m.onnx"
    to_onnx(_fn, SPECS, output_path=path, output_names=["proj", "energy"])
    report = verify(_fn, str(path), SPECS)
    assert isinstance(report, ExportReport) and report, str(report)
    assert [t.inputs["x"][0] for t in report.trials] == [2, 5]  # two sizes for the symbolic dim
    assert {o.name for o in report.worst()} == {"proj", "energy"}
    proj = next(o for o in report.worst() if o.name == "proj")
    assert proj.rtol > 0 and proj.mismatches == 0 and proj.size == 5 * 3
    s = report.summary
    assert s.opset == 23 and s.file_bytes == path.stat().st_size
    assert [str(i) for i in s.inputs] == ["x: float32[B, 4]", "w: float32[4, 3]"]
    assert s.op_histogram.get("Sin") == 1 and s.node_count == sum(s.op_histogram.values())
    data = json.loads(json.dumps(report.to_dict()))  # plain data, JSON-ready
    assert data["ok"] is True and data["summary"]["outputs"][0]["name"] == "proj"
    md = report.to_markdown()
    assert "| proj |" in md and "| ops |" in md
    text = str(report)
    assert "energy" in text and "match" in text


def test_report_catches_a_wrong_model_and_counts_mismatches(mini_registry):
    model = to_onnx(_fn, SPECS)
    wrong = lambda x, w: (jnp.sin(x) @ w, (x * x).sum(axis=1) + 1e-3)  # noqa: E731
    report = verify(wrong, model, SPECS)
    assert not report
    energy = next(o for o in report.worst() if o.name == "output_1")
    assert energy.mismatches == energy.size and 5e-4 < energy.max_abs_error < 2e-3
    assert "MISMATCH" in str(report) and "FAIL" in report.to_markdown()


def test_report_on_concrete_inputs_and_int_specs(mini_registry):
    fn = lambda ids: (ids * ids).astype(jnp.float32)  # noqa: E731
    spec = jax.ShapeDtypeStruct(("B", "T"), jnp.int32)
    model = to_onnx(fn, [spec])
    report = verify(fn, model, [spec])
    assert report and len(report.trials) == 2
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    report = verify(fn, model, [x])
    assert report and report.trials[0].inputs == {"ids": [2, 3]}


def test_trial_inputs_evaluate_dim_expressions():
    trials = trial_inputs([("B", "2*B"), jax.ShapeDtypeStruct((3,), jnp.int32)])
    assert [a.shape for a in trials[0]] == [(2, 4), (3,)] and [a.shape for a in trials[1]] == [(5, 10), (3,)]
    assert trials[0][1].dtype == np.int32 and trials[0][1].min() >= 0


def test_summary_counts_parameters(mini_registry):
    w = np.ones((4, 3), np.float32)
    model = to_onnx(lambda x: x @ w, [("B", 4)])
    s = summarize(model)
    assert (s.parameter_count, s.parameter_bytes) == (12, 48)  # the weights, and nothing else
    assert s.file_bytes is None
    assert isinstance(model, onnx.ModelProto)

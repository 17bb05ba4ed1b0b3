"""Progress of long exports (jax2onnx.progress): a bar on a terminal, plain lines when asked for
outside one, nothing when not a terminal or when asked; stages, tensors and bytes written."""

from __future__ import annotations

import importlib.util
import io

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax2onnx import InputSpecError, Weights, progress, to_onnx
from jax2onnx.cli import main

N_LAYERS, DIM = 6, 64  # 6 weights of 16 KiB: each goes to the weights file
#: rich draws the bar; it is optional for core, and without it a terminal gets plain lines
RICH = importlib.util.find_spec("rich") is not None


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _export(tmp_path, **kw):
    rng = np.random.default_rng(0)
    stored = {f"layers.{i}.w": rng.standard_normal((DIM, DIM)).astype(np.float32) for i in range(N_LAYERS)}
    abstract = {"layers": [{"w": jax.ShapeDtypeStruct((DIM, DIM), jnp.float32)} for _ in range(N_LAYERS)]}

    def forward(params, x):
        for layer in params["layers"]:
            x = jnp.sin(x @ layer["w"])
        return x

    return to_onnx(forward, [Weights(abstract, stored), ("B", DIM)], output_path=str(tmp_path / "m.onnx"), **kw)


@pytest.mark.skipif(not RICH, reason="rich is optional for core: without it a terminal gets plain lines (tested below)")
def test_a_terminal_shows_a_bar_with_the_stages_and_tensors_written(tmp_path, mini_registry, monkeypatch):
    term = FakeTerminal()
    monkeypatch.setattr("sys.stderr", term)
    _export(tmp_path, progress=True)
    shown = term.getvalue()
    assert "\x1b[" in shown, "a live bar (terminal control codes), not plain lines"
    # the bar redraws a few times a second, so a quick stage may never be drawn; the last state is
    assert "write: writing" in shown
    assert f"{N_LAYERS}/{N_LAYERS} tensors" in shown
    assert f"{N_LAYERS * DIM * DIM * 4 / 1024:.1f} KiB of {N_LAYERS * DIM * DIM * 4 / 1024:.1f} KiB" in shown


def test_by_default_a_terminal_shows_the_bar_only_for_a_long_export(tmp_path, mini_registry, monkeypatch):
    term = FakeTerminal()
    monkeypatch.setattr("sys.stderr", term)
    monkeypatch.setattr(progress, "AUTO_DELAY_S", 1e9)  # "long": longer than any test's export
    _export(tmp_path)
    assert term.getvalue() == "", "an export shorter than the delay prints nothing"
    monkeypatch.setattr(progress, "AUTO_DELAY_S", 0.0)
    _export(tmp_path)
    assert f"{N_LAYERS}/{N_LAYERS} tensors" in term.getvalue()


def test_not_a_terminal_is_silent_unless_asked_then_plain_lines(tmp_path, mini_registry, monkeypatch):
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    monkeypatch.setattr(progress, "AUTO_DELAY_S", 0.0)
    _export(tmp_path)
    assert log.getvalue() == ""
    _export(tmp_path, progress=True)
    lines = log.getvalue().splitlines()
    assert "\x1b[" not in log.getvalue()
    assert lines[0] == "jax2onnx: trace ..." and lines[-1].startswith("jax2onnx: done in ")
    assert f"jax2onnx: writing {N_LAYERS} tensors ({N_LAYERS * DIM * DIM * 4 / 1024:.1f} KiB)" in lines
    assert any(line.strip().startswith(f"jax2onnx:   {N_LAYERS}/{N_LAYERS} tensors") for line in lines)
    assert [line for line in lines if line.endswith(" ...")] == [
        f"jax2onnx: {s} ..." for s in ("trace", "lower", "optimize", "write")]


def test_progress_false_is_silent_on_a_terminal(tmp_path, mini_registry, monkeypatch):
    term = FakeTerminal()
    monkeypatch.setattr("sys.stderr", term)
    monkeypatch.setattr(progress, "AUTO_DELAY_S", 0.0)
    _export(tmp_path, progress=False)
    assert term.getvalue() == ""


def test_a_bad_progress_value_is_refused(tmp_path, mini_registry):
    with pytest.raises(InputSpecError, match="progress must be True .* False .* or None"):
        _export(tmp_path, progress="yes")


def test_counted_steps_plain_lines():
    """What a calibration reports: one line per tenth of its layers."""
    log = io.StringIO()
    with progress.reporting(True, stream=log) as reporter:
        reporter.stage("quantize")
        reporter.steps("calibrating layers", 20)
        for _ in range(20):
            reporter.step()
    lines = log.getvalue().splitlines()
    assert "jax2onnx: calibrating layers" in lines
    assert "jax2onnx:   20/20 layers" in lines and "jax2onnx:   2/20 layers" in lines
    assert len([line for line in lines if "/20 layers" in line]) == 10


def test_an_outer_reporter_is_the_one_nested_exports_use():
    log = io.StringIO()
    with progress.reporting(True, stream=log) as outer:
        with progress.reporting(False) as inner:
            assert inner is outer and progress.current() is outer
    assert progress.current() is not outer


def test_cli_quiet_prints_no_progress(tmp_path, mini_registry, monkeypatch, capsys):
    module = tmp_path / "quiet_model.py"
    module.write_text("import jax.numpy as jnp\n\ndef f(x):\n    return jnp.sin(x)\n")
    monkeypatch.setattr(progress, "AUTO_DELAY_S", 0.0)
    term = FakeTerminal()
    monkeypatch.setattr("sys.stderr", term)
    assert main(["convert", f"{module}:f", "--input", "B,4", "-o", str(tmp_path / "q.onnx"), "--quiet"]) == 0
    assert term.getvalue() == ""
    assert main(["convert", f"{module}:f", "--input", "B,4", "-o", str(tmp_path / "q.onnx")]) == 0
    shown = term.getvalue()
    assert "write" in shown and ("\x1b[" in shown) == RICH, "a terminal gets the bar (plain lines without rich)"


def test_calibration_reports_its_layers(monkeypatch):
    pytest.importorskip("onnxruntime", reason="calibration runs the float32 export in onnxruntime")
    pytest.importorskip("jax2onnx_lax", reason="the lax pack lowers x @ w to the MatMul int4 quantizes")
    from jax2onnx import Precision

    rng = np.random.default_rng(1)
    w = rng.standard_normal((64, 64)).astype(np.float32)
    batches = [(rng.standard_normal((8, 64)).astype(np.float32),) for _ in range(3)]
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    to_onnx(lambda x: jnp.sin(jnp.sin(x @ w) @ w.T), [("B", 64)],
            precision=Precision("int4", method="gptq", calibration=batches),
            progress=True)
    lines = log.getvalue().splitlines()
    # two matmuls in a row: two groups of weights, the second calibrated through the quantized first
    assert "jax2onnx: calibrating layers" in lines and "jax2onnx:   2/2 layers" in lines, lines


def test_without_rich_a_terminal_gets_plain_lines(tmp_path, mini_registry, monkeypatch):
    """rich is optional for core: its absence costs the bar, not the report."""
    monkeypatch.setattr(progress, "_has_rich", lambda: False)
    term = FakeTerminal()
    monkeypatch.setattr("sys.stderr", term)
    _export(tmp_path, progress=True)
    assert "\x1b[" not in term.getvalue() and f"jax2onnx:   {N_LAYERS}/{N_LAYERS} tensors" in term.getvalue()


def test_the_bar_appears_when_the_delay_is_over_not_at_the_next_stage(mini_registry, tmp_path, monkeypatch):
    """Issue #46: with the default delay, a stage running past it (a long trace) shows the bar then,
    while it runs (was: nothing until the next stage began). The traced function waits, up to a
    bound, for the bar to appear: it appears during the trace, naming it."""
    import time

    term = FakeTerminal()
    monkeypatch.setattr("sys.stderr", term)
    monkeypatch.setattr(progress, "AUTO_DELAY_S", 0.2)
    seen_during_trace = []

    def slow_to_trace(x):
        deadline = time.monotonic() + 30  # a bound for a stalled machine, not a timing claim
        while "trace" not in term.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        seen_during_trace.append(term.getvalue())
        return jnp.sin(x)

    to_onnx(slow_to_trace, [("B", 4)])
    # the live bar is rich's (escape codes); without rich (optional for core) the same stage as a plain line
    assert "trace" in seen_during_trace[0] and ("\x1b[" in seen_during_trace[0]) == RICH, seen_during_trace


def test_without_rich_the_delayed_stage_line_is_written_when_the_delay_is_over(mini_registry, monkeypatch):
    """The plain lines' form of the same: the running stage's line once the delay is over."""
    import time

    monkeypatch.setattr(progress, "_has_rich", lambda: False)
    monkeypatch.setattr(progress, "AUTO_DELAY_S", 0.2)
    term = FakeTerminal()
    monkeypatch.setattr("sys.stderr", term)
    seen_during_trace = []

    def slow_to_trace(x):
        deadline = time.monotonic() + 30
        while "trace ..." not in term.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        seen_during_trace.append(term.getvalue())
        return jnp.sin(x)

    to_onnx(slow_to_trace, [("B", 4)])
    assert seen_during_trace == ["jax2onnx: trace ...\n"]
    assert term.getvalue().splitlines()[-1].startswith("jax2onnx: done in ")


def test_a_quick_export_stops_the_timer(mini_registry, monkeypatch):
    """Closed before the delay is over: nothing is drawn later by the timer."""
    import time

    term = FakeTerminal()
    monkeypatch.setattr("sys.stderr", term)
    monkeypatch.setattr(progress, "AUTO_DELAY_S", 0.3)
    reporter = progress.make(None)
    reporter.stage("trace")
    reporter.close()
    time.sleep(0.6)
    assert term.getvalue() == "" and not reporter._timer.is_alive()

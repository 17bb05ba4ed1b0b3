"""The report as a reader meets it: at 80 columns and narrower no cell is split mid-word, piped it
is plain text; parameters are the model's weights, not its shape and axis constants."""

from __future__ import annotations

import io
import re

import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import to_onnx, verify
from jax2onnx.verification.render import column_widths, compact_shapes
from jax2onnx.verification.report import summarize

W = np.linspace(-1.0, 1.0, 4 * 3, dtype=np.float32).reshape(4, 3)
B = np.arange(3, dtype=np.float32)


def _fn(x):
    # a long output name and a rank-3 shape: the cells that rich used to fold at 80 columns
    return (jnp.sin(x) @ W + B) * 2.0, (x * x).sum(axis=1)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    from mini_pack import MiniPack, registry_in_use

    path = tmp_path_factory.mktemp("render") / "m.onnx"
    with registry_in_use(("jax2onnx-mini", MiniPack())):
        to_onnx(_fn, [("B", 7, 4)], output_path=path, output_names=["projected_features", "energy"])
        return verify(_fn, str(path), [("B", 7, 4)])


def _console(**settings):
    """A rich console; rich is optional for core, so the tests of what it prints skip without it."""
    console = pytest.importorskip("rich.console", reason="rich is optional for core (plain text without it)")
    return console.Console(**settings)


def _terminal(report, width):
    buffer = io.StringIO()
    report.print(_console(file=buffer, width=width, force_terminal=True, color_system=None))
    return re.sub(r"\x1b\[[0-9;]*m", "", buffer.getvalue())


def _cell_words(report):
    """Every word of every cell, as the tables show it (shapes without the space after a comma)."""
    cells = [c for row in report._output_rows() for c in row] + [c for row in report._summary_rows() for c in row]
    return {w for cell in cells for w in compact_shapes(cell).split()}


@pytest.mark.parametrize("width", [80, 100, 60])
def test_a_terminal_of_any_width_gets_whole_words(report, width):
    text = _terminal(report, width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), text
    words = _cell_words(report)
    assert "float32[2,7,3]" in words and "projected_features" in words  # the cells the test is about
    split = sorted(w for w in words if not any(re.search(rf"(?<!\S){re.escape(w)}(?!\S)", line) for line in lines))
    assert not split, f"split across lines: {split}\n{text}"
    assert "…" not in text


def test_wide_terminals_get_a_row_per_output_narrow_ones_a_block(report):
    wide = _terminal(report, 100).splitlines()
    assert any("─" in line for line in wide)  # a rich table: the rule under its header
    row = next(line for line in wide if line.startswith("projected_features"))
    assert row.split()[1:] == ["float32[2,7,3]", *row.split()[2:5], "0.0001/1e-05", "ok"]
    # at 80 columns the row of longest words (frame included) does not fit: a block per output
    narrow = _terminal(report, 80).splitlines()
    assert [line.split()[1] for line in narrow if line.startswith("output ")] == ["projected_features", "energy"]
    shapes = [compact_shapes(row[1]) for row in report._output_rows()]  # each output's worst trial
    assert [line.split()[1] for line in narrow if line.startswith("shape ")] == shapes


def test_too_narrow_for_the_longest_word_prints_plain_lines(report):
    assert _terminal(report, 30).rstrip("\n") == str(report)


def test_piped_output_is_plain_text(report):
    buffer = io.StringIO()
    report.print(_console(file=buffer, width=80, force_terminal=False))  # what a pipe or a file gets
    text = buffer.getvalue()
    assert text == str(report) + "\n"
    assert "float32[2, 7, 3]" in text and not set("─│┃━") & set(text)


def test_column_widths_keep_the_longest_word_and_fit_the_room():
    header, rows = ["name", "shape"], [["a_long_name", "float32[2,3] x"]]
    assert column_widths(header, rows, 100) == [11, 14]  # room to spare: each its longest line
    narrow = column_widths(header, rows, 24)
    assert narrow is not None and narrow[0] >= 11 and narrow[1] >= 12 and sum(narrow) <= 24
    assert column_widths(header, rows, 22) is None  # the longest words alone need 23


def test_parameters_are_weights_not_shape_constants(mini_registry):
    model = to_onnx(lambda x: (x * 2.0).reshape(-1, 12).sum(axis=1), [("B", 3, 4)])
    kinds = {onnx.TensorProto.DataType.Name(t.data_type) for t in model.graph.initializer}
    assert "INT64" in kinds  # the reshape's shape: an initializer, and not a parameter
    s = summarize(model)
    assert (s.parameter_count, s.parameter_bytes) == (0, 0)

    s = summarize(to_onnx(_fn, [("B", 7, 4)]))
    assert (s.parameter_count, s.parameter_bytes) == (W.size + B.size, 4 * (W.size + B.size))


def test_quantized_weights_are_parameters():
    # the lax pack's MatMul, which int8 quantizes (the mini pack writes Einsum); core alone skips it
    pytest.importorskip("jax2onnx_lax", reason="needs the lax pack's MatMul lowering (nox -s tests runs it)")
    w = np.linspace(-1.0, 1.0, 64 * 64, dtype=np.float32).reshape(64, 64)
    model = to_onnx(lambda x: x @ w, [("B", 64)], precision="int8", target="onnxruntime")  # its int8 form
    stored = {onnx.TensorProto.DataType.Name(t.data_type): int(np.prod(t.dims)) for t in model.graph.initializer}
    assert stored.get("UINT8") == w.size  # the weight, 8-bit MatMulNBits' codes (int8 + 128)
    s = summarize(model)
    assert s.parameter_count == sum(stored.values()) == w.size + 64  # the codes and a float scale per column (K = 64: one block)

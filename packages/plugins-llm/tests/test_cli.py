"""``jax2onnx llm``: the verb this pack adds to core's CLI (entry-point group ``jax2onnx.cli``)."""

from __future__ import annotations

import io
import json
import os

import pytest
from jax2onnx.cli import main
from llm_test_helpers import require_genai

FACTORY = """
import sys
sys.path.insert(0, {tests!r})
from test_spec import tiny_jax_decoder

def make():
    return tiny_jax_decoder()
"""


def test_llm_verb_exports_and_generates(tmp_path, capsys):
    require_genai()
    factory = tmp_path / "factory.py"
    factory.write_text(FACTORY.format(tests=os.path.dirname(__file__)))
    out = tmp_path / "model"
    code = main(["llm", f"{factory}:make", "-o", str(out), "--max-length", "48", "--cache", "shared",
                 "--target", "onnx", "--generate", "5,6,7", "--new-tokens", "8"])
    assert code == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"wrote {out}"
    # the export's per-layer attention report: the decoder's attend() fused as opset-23 Attention
    assert printed[1:-1] == ["  attention layers 0-1: Attention"], printed
    assert len(printed[-1].split()) == 8
    config = json.loads((out / "genai_config.json").read_text())
    assert config["search"]["past_present_share_buffer"] is True and config["model"]["context_length"] == 48


def test_llm_verb_bad_input_is_one_line(tmp_path, capsys):
    factory = tmp_path / "factory.py"
    factory.write_text(FACTORY.format(tests=os.path.dirname(__file__)))
    code = main(["llm", f"{factory}:make", "-o", str(tmp_path / "m"), "--max-length", "4096"])
    err = capsys.readouterr().err
    assert code == 3 and "max_length <= 128" in err
    assert not (tmp_path / "m").exists()


BAD_INPUT = [
    (["--precision", "int3"], "argument --precision: invalid choice: 'int3'"),
    (["--generate", "a,b"], "--generate 'a,b': give comma-separated token ids"),
    (["--generate", "5,,7"], "--generate '5,,7'"),
    (["--generate", ""], "--generate ''"),
    (["--max-length", "0"], "argument --max-length: expected a whole number >= 1"),
    (["--new-tokens", "-3", "--generate", "5"], "argument --new-tokens: expected a whole number >= 1"),
    (["--cache", "nope"], "argument --cache: invalid choice: 'nope'"),
    (["--target", "tensorrt"], "argument --target: invalid choice: 'tensorrt'"),
    (["--tokenizer", "{tmp}/no_such_folder"], "--tokenizer {tmp}/no_such_folder: no such folder"),
    *([(["-o", "/proc/jax2onnx_test/model"], "cannot write in /proc")]
      if os.path.isdir("/proc/self") else []),  # a folder nobody writes in, root included (Linux)
]


@pytest.mark.parametrize(("extra", "fragment"), BAD_INPUT, ids=[" ".join(e) for e, _ in BAD_INPUT])
def test_llm_verb_refuses_bad_input_before_exporting(tmp_path, capsys, extra, fragment):
    """Exit status 2, one line on stderr, and no model folder: refused before any export."""
    factory = tmp_path / "factory.py"
    factory.write_text(FACTORY.format(tests=os.path.dirname(__file__)))
    out = tmp_path / "model"
    argv = ["llm", f"{factory}:make", "-o", str(out), "--max-length", "48"]
    argv += [e.replace("{tmp}", str(tmp_path)) for e in extra]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's refusals
        code = exit_.code
    assert code == 2
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1 and "error:" in lines[0] and fragment.replace("{tmp}", str(tmp_path)) in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["factory.py"]  # no model folder, no temp folder


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_llm_verb_shows_progress_on_a_terminal_and_quiet_silences_it(tmp_path, monkeypatch):
    from jax2onnx import progress

    factory = tmp_path / "factory.py"
    factory.write_text(FACTORY.format(tests=os.path.dirname(__file__)))
    monkeypatch.setattr(progress, "AUTO_DELAY_S", 0.0)  # the bar waits for a long export; this one is short
    for quiet, out in ((True, "quiet"), (False, "shown")):
        term = _Terminal()
        monkeypatch.setattr("sys.stderr", term)
        args = ["llm", f"{factory}:make", "-o", str(tmp_path / out), "--max-length", "32"]
        assert main(args + (["--quiet"] if quiet else [])) == 0
        if quiet:
            assert term.getvalue() == ""
        else:
            assert "\x1b[" in term.getvalue() and "jax2onnx" in term.getvalue()

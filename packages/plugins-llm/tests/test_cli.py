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

def params():
    return {{"w": [1.0, 2.0]}}
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
    # a value the model cannot take is a bad command line (2), not a failed conversion (3)
    assert code == 2 and "max_length <= 128" in err
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
    *([(["-o", "/proc/jax2onnx_test/model"], "cannot write in /proc (the folder takes no new files")]
      if os.path.isdir("/proc/self") else []),  # a folder nobody writes in, root included (Linux)
    (["--bos-token-id", "x"], "argument --bos-token-id: expected a token id"),
    (["--eos-token-id", "2,b"], "argument --eos-token-id: expected a token id"),
    (["--pad-token-id", "-1"], "argument --pad-token-id: expected a token id"),
    (["--opset", "5"], "--opset 5: opset=5 is not supported"),
    (["--weights", "{tmp}/no_such.safetensors"], "--weights {tmp}/no_such.safetensors: no such file or folder"),
    (["--search", "top_k"], "--search 'top_k': give NAME=VALUE with NAME one of"),
    (["--search", "no_such=1"], "--search 'no_such=1': give NAME=VALUE"),
    (["--search", "top_k=many"], "--search 'top_k=many': top_k takes a whole number"),
    (["--search", "do_sample=yes"], "--search 'do_sample=yes': do_sample takes true or false"),
    (["--search", "max_length=64"], "the generation length is at most the export's max_length (48)"),
    (["--quiet", "--progress"], "argument --progress: not allowed with argument --quiet/-q"),
    # values the model refuses, found once it is loaded (before anything is traced or written)
    (["--bos-token-id", "96"], "bos_token_id (96, from the bos_token_id= argument) must be in range [0, 96)"),
    (["--eos-token-id", "3,200"], "eos_token_id (200, from the eos_token_id= argument) must be in range [0, 96)"),
    (["--max-length", "1"], "max_length=1: give the most tokens a sequence may reach, an int >= 2"),
    (["--precision", "float32,int3"], "argument --precision: invalid choice: 'int3'"),
    (["--target", "web", "--generate", "5"], "a --target web folder is run by transformers.js: drop --generate"),
    # a browser folder's options, refused by export_causal_lm before anything is written
    (["--target", "web", "--cache", "shared"], "growing cache"),
    (["--precision", "float32,int4"], "give one"),
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
    # no model folder, no temp folder (Python may cache the imported factory's bytecode beside it)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "__pycache__") == ["factory.py"]


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


def test_bos_out_of_range_names_the_flag_that_fixes_it(tmp_path, capsys):
    """The special-token advice names the command line's option, not only export_causal_lm's keyword."""
    factory = tmp_path / "factory.py"
    factory.write_text(FACTORY.format(tests=os.path.dirname(__file__)))
    code = main(["llm", f"{factory}:make", "-o", str(tmp_path / "m"), "--max-length", "48", "--bos-token-id", "500"])
    assert code == 2
    assert "--bos-token-id <id>" in capsys.readouterr().err


@pytest.mark.parametrize("where", ["a file", "under a file"])
def test_output_paths_that_cannot_be_folders_say_why(tmp_path, capsys, where):
    factory = tmp_path / "factory.py"
    factory.write_text(FACTORY.format(tests=os.path.dirname(__file__)))
    taken = tmp_path / "taken.txt"
    taken.write_text("not a folder\n")
    out = taken if where == "a file" else taken / "sub" / "model"
    assert main(["llm", f"{factory}:make", "-o", str(out), "--max-length", "48"]) == 2
    err = capsys.readouterr().err
    assert ("is a file; give the path of the folder" if where == "a file" else f"{taken} is a file, not a folder") in err
    assert "No such file or directory" not in err and taken.read_text() == "not a folder\n"


def test_every_export_keyword_that_takes_a_value_has_an_option_with_its_default():
    """CLI = API: each keyword-only parameter of export_causal_lm is an option of ``jax2onnx llm``
    (its argparse dest is the keyword's name) whose default is the keyword's default; progress=
    is --quiet (False) / --progress (True)."""
    import argparse
    import inspect

    from jax2onnx_llm import export_causal_lm
    from jax2onnx_llm.cli import register

    sub = argparse.ArgumentParser().add_subparsers()
    register(sub)
    llm = sub.choices["llm"]
    required = ["pkg.mod:make", "-o", "out", "--max-length", "8"]
    parsed = vars(llm.parse_args(required))
    keywords = {name: p.default for name, p in inspect.signature(export_causal_lm).parameters.items()
                if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert {"bos_token_id", "weights", "opset", "external_data", "search", "progress"} <= set(keywords), keywords
    missing = sorted(set(keywords) - set(parsed))
    assert not missing, f"export_causal_lm keywords without a `jax2onnx llm` option: {missing}"
    defaults = {name: parsed[name] for name in keywords if keywords[name] is not inspect.Parameter.empty}
    assert defaults == {name: d for name, d in keywords.items() if d is not inspect.Parameter.empty}
    assert vars(llm.parse_args([*required, "--quiet"]))["progress"] is False
    assert vars(llm.parse_args([*required, "--progress"]))["progress"] is True


def test_every_option_reaches_export_causal_lm(tmp_path, monkeypatch):
    """Each value given on the command line is the keyword export_causal_lm gets."""
    import jax2onnx_llm.export

    factory = tmp_path / "factory.py"
    factory.write_text(FACTORY.format(tests=os.path.dirname(__file__)))
    (tmp_path / "tok").mkdir()
    (tmp_path / "w.safetensors").write_bytes(b"")
    seen = {}

    class Stop(Exception):
        pass

    def record(model, out_dir, **keywords):
        seen.update(keywords, out_dir=out_dir)
        raise Stop  # what the export would do is the API tests'; this test is the command line's

    monkeypatch.setattr(jax2onnx_llm.export, "export_causal_lm", record)
    argv = ["llm", f"{factory}:make", "-o", str(tmp_path / "m"), "--max-length", "40", "--cache", "shared",
            "--target", "onnx", "--precision", "int8", "--tokenizer", str(tmp_path / "tok"), "--bos-token-id", "1",
            "--eos-token-id", "2,3", "--pad-token-id", "0", "--weights", str(tmp_path / "w.safetensors"),
            "--opset", "21", "--no-external-data", "--search", "do_sample=true", "--search", "top_k=7",
            "--search", "temperature=0.5", "--search", "max_length=30", "--params", f"{factory}:params", "--progress"]
    assert main(argv) == 5  # Stop: an unexpected error, as any would be
    assert seen == dict(out_dir=str(tmp_path / "m"), max_length=40, cache="shared", target="onnx", precision="int8",
                        tokenizer=str(tmp_path / "tok"), bos_token_id=1, eos_token_id=[2, 3], pad_token_id=0,
                        weights=str(tmp_path / "w.safetensors"), opset=21, external_data=False,
                        search={"do_sample": True, "top_k": 7, "temperature": 0.5, "max_length": 30},
                        params={"w": [1.0, 2.0]}, progress=True)


def test_a_single_file_folder_reports_its_stages_tensors_and_bytes(tmp_path, monkeypatch):
    """Issue #46: an export whose model.onnx holds its weights (no model.onnx.data) counts them as
    they are written, as a streamed one does, besides its stages (was: nothing between the write
    stage and its end). Plain lines (--progress outside a terminal) show each."""
    factory = tmp_path / "factory.py"
    factory.write_text(FACTORY.format(tests=os.path.dirname(__file__)))
    log = io.StringIO()
    monkeypatch.setattr("sys.stderr", log)
    out = tmp_path / "single"
    assert main(["llm", f"{factory}:make", "-o", str(out), "--max-length", "32", "--progress"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["genai_config.json", "model.onnx"]
    lines = log.getvalue().splitlines()
    started = [line.removeprefix("jax2onnx: ").removesuffix(" ...") for line in lines if line.endswith(" ...")]
    assert started == ["check", "trace", "lower", "optimize", "write", "genai_config.json"], started
    (writing,) = [line for line in lines if line.startswith("jax2onnx: writing ")]
    count = int(writing.split()[2])
    assert count >= 10, writing  # the embedding, the head and each layer's matrices
    assert any(line.startswith(f"jax2onnx:   {count}/{count} tensors, ") for line in lines), lines


def test_llm_verb_writes_a_browser_folder(tmp_path, capsys):
    """--target web with several comma-separated precisions: the transformers.js folder, one file per dtype."""
    factory = tmp_path / "factory.py"
    factory.write_text(FACTORY.format(tests=os.path.dirname(__file__)))
    out = tmp_path / "web"
    code = main(["llm", f"{factory}:make", "-o", str(out), "--max-length", "32", "--target", "web",
                 "--precision", "float32,q4f16", "--quiet"])
    assert code == 0, capsys.readouterr().err
    assert capsys.readouterr().out.splitlines() == [f"wrote {out}"]
    assert sorted(p.name for p in (out / "onnx").iterdir()) == ["model.onnx", "model_q4f16.onnx"]
    config = json.loads((out / "config.json").read_text())
    assert config["transformers.js_config"]["dtype"] == "fp32" and not (out / "genai_config.json").exists()

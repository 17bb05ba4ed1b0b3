"""Every verb of the ``jax2onnx`` command line x a bad input: the exit status ``--help`` documents
for it, exactly one line on stderr naming the problem, and nothing written (neither the output
path nor anything else in the working folder)."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest
from jax2onnx.cli import EXIT_CODES, main

MODEL = """
    import jax.numpy as jnp

    def fn(x):
        return jnp.sin(x) * 2.0

    def broken(x):
        return x * float(x.sum())

    class Net:
        def __call__(self, x):
            return x * 2.0
"""

#: (argv, exit status, a fragment of the one error line). ``{model}``: the model file;
#: ``{out}``: an output path in the watched folder; ``{not_onnx}``/``{empty}``/``{list_json}``/
#: ``{not_json}``: input files of the wrong kind (made outside the watched folder); ``{model_folder}``:
#: the folder holding them. The fragment is filled in too.
CASES = [
    # convert: input specs
    (["convert", "{model}:fn", "-i", "B,,4", "-o", "{out}"], 2, "dim 1 is empty"),
    (["convert", "{model}:fn", "-i", ",B,4", "-o", "{out}"], 2, "dim 0 is empty"),
    (["convert", "{model}:fn", "-i", "B,-4", "-o", "{out}"], 2, "dim 1 is -4"),
    (["convert", "{model}:fn", "-i", "B,4:notadtype", "-o", "{out}"], 2, "unknown dtype 'notadtype'"),
    (["convert", "{model}:fn", "-i", "(B,4)", "-o", "{out}"], 2, "without brackets"),
    (["convert", "{model}:fn", "-i", "3x4", "-o", "{out}"], 2, "for a 3x4 shape write 3,4"),
    (["convert", "{model}:fn", "-o", "{out}"], 2, "the following arguments are required: --input/-i"),
    # convert: options
    (["convert", "{model}:fn", "-i", "B,4", "-o", "{out}", "--opset", "5"], 2, "--opset 5"),
    (["convert", "{model}:fn", "-i", "B,4", "-o", "{out}", "--param", "x"], 2, "expected NAME=VALUE"),
    (["convert", "{model}:fn", "-i", "B,4", "-o", "{out}", "--report", "{out}.json"], 2, "add --verify"),
    (["convert", "{model}:fn", "-i", "B,4", "-o", "{out}", "--target", "nope"], 2, "target must be one of"),
    (["convert", "{model}:fn", "-i", "B,4", "-o", "{out}", "--precision", "int3"], 2, "invalid choice: 'int3'"),
    (["convert", "{model}:fn", "-i", "B,4", "-o", "{out}", "--rtol", "-1"], 2, "argument --rtol: expected a number >= 0"),
    (["convert", "{model}:fn", "-i", "B,4", "-o", "{out}", "--atol", "nan"], 2, "argument --atol: expected a number >= 0"),
    (["convert", "{model}:fn", "-i", "B,4", "-o", "{out}", "--input-name", "a", "--input-name", "b"], 2,
     "2 --input-name for 1 --input"),
    (["convert", "{model}:fn", "-i", "B,4", "-o", "{out}", "--no-such-option"], 2, "unrecognized arguments: --no-such-option"),
    (["convert", "{model}:fn", "-i", "B,4", "-o", "{out}", "--target", "web", "--external-data"], 2,
     "--target web writes one self-contained file: drop --external-data"),
    (["convert", "{model}:fn", "-i", "B,4", "-o", "."], 2, "-o .: is a folder"),
    *([(["convert", "{model}:fn", "-i", "B,4", "-o", "/proc/jax2onnx_test/m.onnx"], 2,
        "cannot write in /proc (the folder takes no new files: a virtual or special file system")]
      if os.path.isdir("/proc/self") else []),  # a folder nobody writes in, root included (Linux)
    (["convert", "{model}:fn", "-i", "B,4", "-o", "{not_onnx}/sub/m.onnx"], 2, "not_onnx.onnx is a file, not a folder"),
    (["convert", "{model}:fn", "-i", "B,4", "-o", "{out}", "--verify", "--report", "{not_onnx}/r.json"], 2,
     "--report {not_onnx}/r.json: {not_onnx} is a file, not a folder"),
    # convert: the target
    (["convert", "no_such_module_xyz:fn", "-i", "B,4", "-o", "{out}"], 2, "cannot import 'no_such_module_xyz'"),
    (["convert", "/no/such/file.py:fn", "-i", "B,4", "-o", "{out}"], 2, "no such file"),
    (["convert", "{model_folder}/:fn", "-i", "B,4", "-o", "{out}"], 2, "a folder, not a file; give the .py file"),
    (["convert", "{model}:nope", "-i", "B,4", "-o", "{out}"], 2, "no attribute 'nope'"),
    (["convert", "{model}:Net", "-i", "B,4", "-o", "{out}"], 2, "Net is a class: add --factory"),
    (["convert", "{model}", "-i", "B,4", "-o", "{out}"], 2, "expected MODULE:CALLABLE"),
    # check
    (["check", "--target", "tensorrt", "{out}"], 2, "no such file"),
    (["check", "--target", "tensorrt", "{not_onnx}"], 2, "not an ONNX model"),
    (["check", "--target", "tensorrt", "{empty}"], 2, "not an ONNX model"),
    (["check", "--target", "tensorrt", "."], 2, ".: a folder, not a file"),
    (["check", "--target", "nope", "{not_onnx}"], 2, "argument --target: invalid choice: 'nope'"),
    (["check", "{not_onnx}"], 2, "the following arguments are required: --target"),
    # coverage
    (["coverage", "-r", "{out}.json", "-o", "{out}.md"], 2, "no such file"),
    (["coverage", "-r", "{not_json}", "-o", "{out}.md"], 2, "not a pytest --jax2onnx-report file"),
    (["coverage", "-r", "{list_json}", "-o", "{out}.md"], 2, "expected a JSON object"),
    (["coverage", "-o", "."], 2, "-o .: is a folder"),
    # demo, quickstart, packs, the verb itself
    (["demo", "no_such_demo", "-o", "{out}"], 4, "no installed plugin pack offers the demo 'no_such_demo'"),
    (["quickstart", "-o", "{out}", "--no-such-option"], 2, "unrecognized arguments"),
    (["packs", "--no-such-option"], 2, "unrecognized arguments"),
    (["no_such_verb"], 2, "invalid choice: 'no_such_verb'"),
    ([], 2, "the following arguments are required: command"),
]


def _files(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def _run(argv):
    try:
        return main(argv)
    except SystemExit as exit_:  # argparse's own refusals
        return exit_.code


@pytest.mark.parametrize(("argv", "code", "fragment"), CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_exit_status_one_line_nothing_written(mini_registry, tmp_path, monkeypatch, capsys, argv, code, fragment):
    inputs, work = tmp_path / "inputs", tmp_path / "work"
    inputs.mkdir()
    work.mkdir()
    model = inputs / f"cli_bad_input_model_{abs(hash(str(tmp_path))) % 10**8}.py"
    model.write_text(textwrap.dedent(MODEL))
    (inputs / "not_onnx.onnx").write_text("not a model\n")
    (inputs / "empty.onnx").write_bytes(b"")
    (inputs / "list.json").write_text(json.dumps(["passed"]))
    (inputs / "not_json.json").write_text("{passed")
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.chdir(work)  # a default output or a stray file would land here
    fill = {"{model}": str(model), "{out}": str(work / "out"), "{not_onnx}": str(inputs / "not_onnx.onnx"),
            "{empty}": str(inputs / "empty.onnx"), "{list_json}": str(inputs / "list.json"),
            "{not_json}": str(inputs / "not_json.json"), "{model_folder}": str(inputs)}
    argv = [_fill(a, fill) for a in argv]
    fragment = _fill(fragment, fill)
    if argv and argv[0] == "convert":
        argv.append("-q")  # no progress lines: stderr holds the error alone

    assert _run(argv) == code
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1, captured.err
    assert "error:" in lines[0] and fragment in lines[0], lines[0]
    assert "Traceback" not in captured.err and code in EXIT_CODES
    assert _files(work) == []
    sys.modules.pop(model.stem, None)


def test_a_failed_conversion_exits_3_and_writes_nothing(mini_registry, tmp_path, monkeypatch, capsys):
    """The function's own mistake: JAX's explanation (several lines) under one error prefix."""
    model = tmp_path / f"cli_broken_model_{abs(hash(str(tmp_path))) % 10**8}.py"
    model.write_text(textwrap.dedent(MODEL))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.chdir(work)
    assert _run(["convert", f"{model}:broken", "-i", "B,4", "-o", str(work / "out.onnx"), "-q"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("jax2onnx: error: ") and err.count("jax2onnx: error:") == 1 and "float(x.sum())" in err
    assert "Traceback" not in err and "--debug" in err
    assert _files(work) == []
    sys.modules.pop(model.stem, None)


def _fill(arg, fill):
    for key, value in fill.items():
        arg = arg.replace(key, value)
    return arg


@pytest.mark.skipif(not hasattr(os, "symlink") or os.name == "nt", reason="POSIX symlinks")
def test_an_output_under_a_link_to_nothing_says_so(tmp_path):
    """Issue #46: the path error names what is wrong, not the system's "No such file or directory"."""
    from jax2onnx.cli.usage import CliError, check_writable

    (tmp_path / "gone").symlink_to(tmp_path / "no_such_target")
    with pytest.raises(CliError, match=r"gone is a link to nothing, so nothing can be written under it") as exc:
        check_writable(str(tmp_path / "gone" / "m.onnx"))
    assert exc.value.code == 2 and "No such file" not in str(exc.value)

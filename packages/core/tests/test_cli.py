"""The ``jax2onnx`` command line: targets by file path and module, typed inputs, names, external
data, the --verify report, one-line errors with documented exit codes, and a `packs` listing that
survives broken and conflicting packs."""

from __future__ import annotations

import importlib.metadata
import json
import sys
import textwrap

import onnx
import pytest
from jax2onnx import hookimpl
from jax2onnx.cli import EXIT_CODES, main
from jax2onnx.ir.opsets import MIN_OPSET
from jax2onnx.plugin import Lowering
from mini_pack import registry_in_use

MODEL_FILE = """
    import jax.numpy as jnp
    import numpy as np

    W = np.linspace(-1.0, 1.0, 16 * 32, dtype=np.float32).reshape(16, 32)  # 2 KiB: worth external data

    def fn(x):
        return jnp.sin(x) @ W, (x * x).sum(axis=1)

    def tokens(ids):
        return (ids * ids).astype(jnp.float32)

    def broken(x):
        return x * float(x.sum())

    def make():
        return fn

    class Net:
        def __call__(self, x):
            return x * 2.0
"""


@pytest.fixture
def model_file(tmp_path, monkeypatch):
    """A user's model file in its own folder; sys.path and sys.modules restored afterwards."""
    folder = tmp_path / "project"
    folder.mkdir()
    name = f"user_models_{abs(hash(str(tmp_path))) % 10**8}"
    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(MODEL_FILE))
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield path
    sys.modules.pop(name, None)


def _graph(path):
    return onnx.load(str(path), load_external_data=False).graph


def test_file_path_target_with_names(mini_registry, model_file, tmp_path, capsys):
    out = tmp_path / "m.onnx"
    code = main(["convert", f"{model_file}:fn", "-i", "B,16", "-o", str(out), "--input-name", "pixels",
                 "--output-name", "features", "--output-name", "energy", "--model-name", "demo", "-q"])
    assert code == 0, capsys.readouterr().err
    g = _graph(out)
    assert g.name == "demo" and [i.name for i in g.input] == ["pixels"] and [o.name for o in g.output] == ["features", "energy"]
    assert g.input[0].type.tensor_type.shape.dim[0].dim_param == "B"
    assert "wrote" in capsys.readouterr().out


def test_module_target_from_the_current_folder(mini_registry, model_file, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(model_file.parent)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(model_file.parent))])
    out = tmp_path / "m.onnx"
    assert main(["convert", f"{model_file.stem}:make", "--factory", "-i", "B,16", "-o", str(out), "-q"]) == 0, capsys.readouterr().err
    assert len(_graph(out).output) == 2


def test_typed_inputs_for_token_ids(mini_registry, model_file, tmp_path, capsys):
    out = tmp_path / "t.onnx"
    assert main(["convert", f"{model_file}:tokens", "-i", "B,T:int32", "-o", str(out), "-q", "--verify"]) == 0, capsys.readouterr()
    assert _graph(out).input[0].type.tensor_type.elem_type == onnx.TensorProto.INT32


def test_external_data(mini_registry, model_file, tmp_path, capsys):
    out = tmp_path / "big.onnx"
    assert main(["convert", f"{model_file}:fn", "-i", "B,16", "-o", str(out), "--external-data", "--verify", "-q"]) == 0, capsys.readouterr()
    from jax2onnx.verification.report import summarize

    summary = summarize(str(out))
    assert summary.external_data_bytes is not None and summary.external_data_bytes >= 16 * 32 * 4
    assert summary.file_bytes < 16 * 32 * 4  # the weights are not in the model file


def test_verify_prints_the_report_and_writes_it(mini_registry, model_file, tmp_path, capsys):
    out = tmp_path / "m.onnx"
    report = tmp_path / "report.json"
    code = main(["convert", f"{model_file}:fn", "-i", "B,16", "-o", str(out), "--verify", "--report", str(report), "-q"])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "match" in text and "output_1" in text and ("MatMul" in text or "Einsum" in text)
    data = json.loads(report.read_text())
    assert data["ok"] and [t["inputs"]["x"][0] for t in data["trials"]] == [2, 5]
    assert data["reference"]["matmul_precision"] == "highest"


def test_verify_reference_option_reaches_the_report(mini_registry, model_file, tmp_path, capsys):
    out, report = tmp_path / "m.onnx", tmp_path / "report.json"
    code = main(["convert", f"{model_file}:fn", "-i", "B,16", "-o", str(out), "--verify", "--reference",
                 "accelerator-default", "--report", str(report), "-q"])
    assert code == 0, capsys.readouterr()
    assert json.loads(report.read_text())["reference"]["matmul_precision"] == "default"


def test_verify_mismatch_exits_1(mini_registry, model_file, tmp_path, monkeypatch, capsys):
    import jax2onnx.cli.commands as commands_mod  # the CLI's own reference to verify

    real = commands_mod.verify

    def off_by_a_bit(fn, *args, **kwargs):
        return real(lambda x: [y + 1e-2 for y in fn(x)], *args, **kwargs)

    monkeypatch.setattr(commands_mod, "verify", off_by_a_bit)
    out = tmp_path / "m.onnx"
    assert main(["convert", f"{model_file}:fn", "-i", "B,16", "-o", str(out), "--verify", "-q"]) == 1
    assert "MISMATCH" in capsys.readouterr().out


def test_verify_without_onnxruntime_says_what_to_install_before_converting(mini_registry, model_file, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    out = tmp_path / "m.onnx"
    assert main(["convert", f"{model_file}:fn", "-i", "B,16", "-o", str(out), "--verify", "-q"]) == 4
    err = capsys.readouterr().err
    assert "jax2onnx-core[runtime]" in err and "Traceback" not in err
    assert not out.exists()


@pytest.mark.parametrize(
    ("argv", "code", "fragment"),
    [
        (["convert", "no_such_module_xyz:fn", "-i", "3"], 2, "cannot import 'no_such_module_xyz'"),
        (["convert", "/no/such/file.py:fn", "-i", "3"], 2, "no such file"),
        (["convert", "{file}:nope", "-i", "3"], 2, "no attribute 'nope'"),
        (["convert", "{file}:fn", "-i", "B,16:notadtype"], 2, "unknown dtype 'notadtype'"),
        (["convert", "{file}:broken", "-i", "3"], 3, "float(x.sum())"),
        (["convert", "justaname", "-i", "3"], 2, "expected MODULE:CALLABLE"),
        (["convert", "{file}:fn", "-i", "3x3"], 2, "cannot read the dim '3x3' (for a 3x3 shape write 3,3)"),
        (["convert", "{file}:fn", "-i", "B,8x"], 2, "cannot read the dim '8x'"),
        (["convert", "{file}:fn", "-i", "(B,8)"], 2, "write the dims without brackets, separated by commas: -i B,8"),
        (["convert", "{file}:fn", "-i", "[B,16]:int32"], 2, "-i B,16:int32"),
        (["convert", "{file}:fn", "-i", "B,16", "--opset", str(MIN_OPSET - 1)], 2, f"jax2onnx exports opsets {MIN_OPSET} to"),
        (["convert", "{file}:fn", "-i", "B,16", "--opset", "999"], 2, "upgrade onnx"),
        (["convert", "{file}:make", "-i", "B,16"], 2, "if make() builds the model, add --factory"),
        (["convert", "{file}:Net", "-i", "B,16"], 2, "Net is a class: add --factory"),
    ],
)
def test_errors_are_one_message_with_a_documented_exit_code(mini_registry, model_file, tmp_path, capsys, argv, code, fragment):
    argv = [a.replace("{file}", str(model_file)) for a in argv] + ["-o", str(tmp_path / "x.onnx"), "-q"]
    assert main(argv) == code
    err = capsys.readouterr().err
    assert fragment in err and "Traceback" not in err, err
    assert code in EXIT_CODES


def test_exit_0_converts(mini_registry, model_file, tmp_path, capsys):
    out = tmp_path / "ok.onnx"
    assert main(["convert", f"{model_file}:Net", "--factory", "-i", "B,16", "-o", str(out), "-q"]) == 0
    onnx.checker.check_model(onnx.load(str(out)), full_check=True)


def test_unknown_option_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["convert", "m.py:fn", "-i", "3", "--no-such-option"])
    assert exit_.value.code == 2 and "unrecognized arguments: --no-such-option" in capsys.readouterr().err


def test_an_internal_error_exits_5_and_asks_for_the_traceback(mini_registry, model_file, tmp_path, monkeypatch, capsys):
    import jax2onnx.cli.commands as commands_mod  # the CLI's own reference to summarize

    def crash(path):
        raise RuntimeError("summary exploded")

    monkeypatch.setattr(commands_mod, "summarize", crash)  # a bug in jax2onnx itself: not a user mistake
    assert main(["convert", f"{model_file}:fn", "-i", "B,16", "-o", str(tmp_path / "x.onnx"), "-q"]) == 5
    err = capsys.readouterr().err
    assert "internal error: RuntimeError: summary exploded" in err and "--debug" in err and "Traceback" not in err


def test_verify_report_piped_is_plain_text(mini_registry, model_file, tmp_path, capsys):
    """stdout captured (as by a pipe): the report's plain lines, no table folded to a guessed width
    (tables in a terminal: test_report_render.py)."""
    out = tmp_path / "m.onnx"
    assert main(["convert", f"{model_file}:fn", "-i", "B,16", "-o", str(out), "-q", "--verify"]) == 0
    text = capsys.readouterr().out
    assert "verification: match (inputs tried: x[2, 16]; x[5, 16])" in text
    assert "\ninputs: x: float32[B, 16]\n" in text and not set("─│┃━…") & set(text)


def test_debug_shows_the_traceback(mini_registry, model_file, tmp_path):
    with pytest.raises(Exception, match="float"):
        main(["convert", f"{model_file}:broken", "-i", "3", "-o", str(tmp_path / "x.onnx"), "-q", "--debug"])


def test_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert f"jax2onnx-core {importlib.metadata.version('jax2onnx-core')}" in out
    # then every installed pack with its version, read from entry points (none with core alone)
    packs = sorted({(ep.dist.name, ep.dist.version) for ep in importlib.metadata.entry_points(group="jax2onnx")})
    assert out.splitlines()[1] == "packs: " + (", ".join(f"{n} {v}" for n, v in packs) or "none installed"), out


class _SinA:
    @hookimpl
    def jax2onnx_lowerings(self):
        return [Lowering("sin", lambda ctx, x: ctx.op.Sin(x))]


class _SinB:
    @hookimpl
    def jax2onnx_lowerings(self):
        return [Lowering("sin", lambda ctx, x: ctx.op.Cos(x))]


def test_packs_survives_conflicting_and_broken_packs(capsys):
    broken = importlib.metadata.EntryPoint(name="broken", value="no_such_pack_module_xyz", group="jax2onnx")
    with registry_in_use(("pack-a", _SinA()), ("pack-b", _SinB()), entry_points=[broken]):
        assert main(["packs"]) == 1  # a broken install: listed, and the exit status says so
    out = capsys.readouterr().out
    assert "pack-a" in out and "pack-b" in out
    assert "problem:" in out and "'sin'" in out  # the conflict, named
    broken_lines = [line for line in out.splitlines() if line.startswith("problem:") and "no_such_pack_module_xyz" in line]
    assert len(broken_lines) == 1 and "does not load (ModuleNotFoundError" in broken_lines[0], out


def test_packs_lists_conflicts_instead_of_crashing(capsys):
    with registry_in_use(("pack-a", _SinA()), ("pack-b", _SinB())):
        assert main(["packs"]) == 1
    out = capsys.readouterr().out
    assert "Primitive 'sin' is claimed by two plugin packs: 'pack-a' and 'pack-b'" in out


def test_exit_codes_are_documented_in_the_help_and_the_readme(capsys):
    import os

    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    readme_path = os.path.join(os.path.dirname(__file__), "..", "README.md")
    readme = open(readme_path, encoding="utf-8").read() if os.path.exists(readme_path) else None
    for code, meaning in EXIT_CODES.items():
        assert f"{code}  {meaning}" in help_text
        if readme is not None:
            assert f"| {code} | {meaning} |" in readme


def test_precision(mini_registry, model_file, tmp_path, capsys):
    out = tmp_path / "half.onnx"
    assert main(["convert", f"{model_file}:fn", "-i", "B,16", "-o", str(out), "--precision", "float16", "--verify", "-q"]) == 0, capsys.readouterr()
    graph = _graph(out)
    assert {t.data_type for t in graph.initializer if len(t.dims) == 2} == {onnx.TensorProto.FLOAT16}
    assert "cosine" in capsys.readouterr().out  # the report's precision section


def test_convert_target_is_to_onnx_target(mini_registry, model_file, tmp_path, capsys):
    out = tmp_path / "ort.onnx"
    assert main(["convert", f"{model_file}:fn", "-i", "B,16", "-o", str(out), "--target", "onnxruntime", "-q"]) == 0
    assert {p.key: p.value for p in onnx.load(str(out)).metadata_props}["jax2onnx:target"] == "onnxruntime"
    trt = tmp_path / "trt.onnx"  # float64 end to end: what TensorRT has no kernels for
    assert main(["convert", f"{model_file}:fn", "-i", "B,16", "-o", str(trt), "--target", "tensorrt", "--double", "-q"]) == 3
    err = capsys.readouterr().err
    assert "target='tensorrt'" in err and "float64" in err and not trt.exists()

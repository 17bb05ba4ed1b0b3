"""``jax2onnx llm``: the verb this pack adds to core's CLI (entry-point group ``jax2onnx.cli``)."""

from __future__ import annotations

import json
import os

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
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[0] == f"wrote {out}"
    assert len(printed[1].split()) == 8
    config = json.loads((out / "genai_config.json").read_text())
    assert config["search"]["past_present_share_buffer"] is True and config["model"]["context_length"] == 48


def test_llm_verb_bad_input_is_one_line(tmp_path, capsys):
    factory = tmp_path / "factory.py"
    factory.write_text(FACTORY.format(tests=os.path.dirname(__file__)))
    code = main(["llm", f"{factory}:make", "-o", str(tmp_path / "m"), "--max-length", "4096"])
    err = capsys.readouterr().err
    assert code == 3 and "max_length <= 128" in err
    assert not (tmp_path / "m").exists()

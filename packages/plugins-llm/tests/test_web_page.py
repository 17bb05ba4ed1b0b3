"""docs/guide/web.md's page, served with the folder it loads (``python -m http.server``'s handler in a
thread) and run in Node as a browser would run it (``tests/web/run_page.mjs``: the page fetched over
HTTP, its module script run with the local transformers.js and the CPU for WebGPU): it writes the
tokens the int4 file generates (greedy in onnxruntime here) and, with ``dtype: "fp32"``, KerasHub's
greedy tokens."""

from __future__ import annotations

import functools
import http.server
import json
import pathlib
import re
import subprocess
import threading

import numpy as np
import onnxruntime as ort
import pytest
from jax2onnx_llm import export_causal_lm
from jax2onnx_llm.genai_run import until_eos
from test_web_llm import NODE_DIR, REPO, require_transformers_js

GUIDE = REPO / "docs" / "guide" / "web.md"
PAGE_RUNNER = NODE_DIR / "run_page.mjs"
EOS = 127


def guide_page() -> str:
    blocks = re.findall(r"^```html\n(.*?)^```", GUIDE.read_text(encoding="utf-8"), flags=re.S | re.M)
    assert len(blocks) == 1, f"{GUIDE.name} should hold one html page, found {len(blocks)}"
    return blocks[0]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base class's name)
        pass


@pytest.fixture
def served(tmp_path):
    """``tmp_path`` served over HTTP on a free port; yields its base URL."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=tmp_path))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def run_page(url: str, dtype: str | None = None) -> list[int]:
    run = subprocess.run(["node", str(PAGE_RUNNER), url, *([dtype] if dtype else [])], cwd=NODE_DIR,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"the page failed in Node:\n{run.stderr[-3000:]}"
    written = json.loads(run.stdout.strip().splitlines()[-1])
    assert written["id"] == "out"
    return [int(t) for t in written["out"].split()]


def onnxruntime_greedy(path: pathlib.Path, ids: list[int], new_tokens: int) -> list[int]:
    """Greedy tokens of one browser-folder graph in onnxruntime, the whole sequence each step (empty cache)."""
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    tokens = list(ids)
    for _ in range(new_tokens):
        feeds = {"input_ids": np.asarray([tokens], np.int64), "attention_mask": np.ones((1, len(tokens)), np.int64),
                 "position_ids": np.arange(len(tokens), dtype=np.int64)[None]}
        for value in session.get_inputs()[3:]:
            feeds[value.name] = np.zeros((1, value.shape[1], 0, value.shape[3]), np.float32)
        tokens.append(int(session.run(["logits"], feeds)[0][0, -1].argmax()))
        if tokens[-1] == EOS:
            break
    return tokens[len(ids):]


def test_the_guide_page_generates_in_node(tmp_path, served):
    require_transformers_js()
    from test_keras_hub import make

    page = guide_page()
    model_name = re.search(r'from_pretrained\("([^"]+)"', page).group(1)
    prompt = json.loads(re.search(r"const ids = (\[[^\]]*\])", page).group(1))
    new_tokens = int(re.search(r"max_new_tokens: (\d+)", page).group(1))
    dtype = re.search(r'dtype: "([^"]+)"', page).group(1)
    assert dtype == "q4", f"the page's dtype is {dtype!r}: export that precision below"
    (tmp_path / "index.html").write_text(page, encoding="utf-8")
    model = make("gpt2")  # the guide's tiny GPT-2
    folder = export_causal_lm(model, tmp_path / "models" / model_name, max_length=64, target="web",
                              precision=("float32", "int4"), bos_token_id=1, eos_token_id=EOS, pad_token_id=0)

    want_q4 = onnxruntime_greedy(folder / "onnx" / "model_q4.onnx", prompt, new_tokens)
    assert len(want_q4) == new_tokens, f"the int4 graph stops early: {want_q4}"
    assert run_page(f"{served}/index.html") == want_q4

    ids = np.zeros((1, len(prompt) + new_tokens), np.int32)
    mask = np.zeros_like(ids, bool)
    ids[0, : len(prompt)], mask[0, : len(prompt)] = prompt, True
    out = np.asarray(model.generate({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)["token_ids"])
    want_fp32 = until_eos(out[0, len(prompt):], EOS)
    assert len(set(want_fp32)) > 4, f"the tiny model repeats itself: {want_fp32}"
    assert run_page(f"{served}/index.html", "fp32") == want_fp32

"""``export_causal_lm(..., target="web")``: the folder transformers.js loads. In Node
(``@huggingface/transformers`` from tests/web, onnxruntime-node on CPU) the float32 file generates
exactly the library's greedy tokens for the examples pack's NNX Llama, KerasHub GPT-2, Llama 3, Qwen 3
and Gemma 3 and a Hugging Face Flax Llama (tiny random weights, a left-padded batch); the other dtypes load and
generate, their agreement with float32 reported. The layout, the graph's conventions, the external
data chunks and the browser limits are checked in Python."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess

import jax
import numpy as np
import onnx
import pytest
from jax2onnx_llm import DecoderSpec, export_causal_lm
from jax2onnx_llm.errors import OptionError
from jax2onnx_llm.genai_run import left_pad, until_eos
from jax2onnx_llm.web import REPORT_FILE, limits, web_dtypes
from jax2onnx_llm.web import layout as web_layout
from jax2onnx_llm.web import write as web_write
from llm_test_helpers import NEW_TOKENS, PROMPTS, built_once

REPO = pathlib.Path(__file__).resolve().parents[3]
NODE_DIR = REPO / "tests" / "web"
RUNNER = NODE_DIR / "transformers_generate.mjs"
ALL = ("float32", "float16", "int8", "int4", "q4f16")
FILES = {"float32": "model.onnx", "float16": "model_fp16.onnx", "int8": "model_quantized.onnx",
         "int4": "model_q4.onnx", "q4f16": "model_q4f16.onnx"}
TJS = {"float32": "fp32", "float16": "fp16", "int8": "q8", "int4": "q4", "q4f16": "q4f16"}


def require_transformers_js() -> None:
    if shutil.which("node") is None:
        pytest.skip("Node.js is not installed: transformers.js cannot run the folder")
    if not (NODE_DIR / "node_modules" / "@huggingface" / "transformers").is_dir():
        pytest.skip("@huggingface/transformers is not installed: npm ci --prefix tests/web")


def node_generate(folder, dtypes, prompts, pad, text=None) -> dict:
    ids, mask = left_pad(prompts, pad)
    args = ["node", str(RUNNER), str(folder), ",".join(TJS[d] for d in dtypes), str(NEW_TOKENS),
            json.dumps(ids.tolist()), json.dumps(mask.tolist())] + ([text] if text is not None else [])
    run = subprocess.run(args, cwd=NODE_DIR, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"transformers.js failed:\n{run.stderr[-3000:]}"
    return json.loads(run.stdout.strip().splitlines()[-1])


def assert_library_tokens(folder, reference, pad, eos, dtypes=("float32",), text=None) -> dict:
    """transformers.js' float32 tokens equal ``reference``'s for the left-padded batch of PROMPTS;
    returns every dtype's tokens (and ``text`` encoded by the folder's tokenizer, as "encoded")."""
    require_transformers_js()
    result = node_generate(folder, dtypes, PROMPTS, pad, text)
    got = result["tokens"]
    expected = np.asarray(reference(PROMPTS))
    for row in range(len(PROMPTS)):
        want = until_eos(expected[row], eos)
        assert until_eos(got["fp32"][row], eos) == want, f"row {row}: transformers.js {got['fp32'][row]} vs {want}"
        assert len(want) == NEW_TOKENS, f"row {row} ends after {len(want)} tokens: pick another eos id"
    assert len(set(until_eos(expected[0], eos))) > 4, f"the tiny model repeats itself: {expected[0]}"
    return {**got, "encoded": result.get("encoded")}


# -- the models (tiny, random), one export each for the module ------------------------------------


@pytest.fixture(scope="module")
def nnx_llama():
    from flax import nnx
    from jax2onnx_examples.llama import Llama, LlamaConfig

    model = Llama(LlamaConfig(), rngs=nnx.Rngs(0))

    def build(root):  # once per session, not per xdist worker
        export_causal_lm(model, root / "nnx_llama", max_length=64, target="web", precision=ALL, tokenizer=False)

    folder = built_once("test_web_llm-nnx_llama", build)[0] / "nnx_llama"
    spec = model.__jax2onnx_decoder__()

    def reference(prompts):
        ids, mask = left_pad(prompts, spec.pad_token_id)
        return model.generate(ids, mask, NEW_TOKENS)

    return folder, reference, spec.pad_token_id, spec.eos_token_id


def test_folder_layout_and_graph_conventions(nnx_llama):
    folder = nnx_llama[0]
    assert sorted(p.name for p in (folder / "onnx").iterdir()) == sorted(FILES.values())
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama" and config["num_hidden_layers"] == 2 and config["num_key_value_heads"] == 2
    assert config["transformers.js_config"] == {"dtype": "fp32"}  # the first dtype; no external data
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["eos_token_id"] == nnx_llama[3] and generation["do_sample"] is False
    for name in FILES.values():
        path = folder / "onnx" / name
        onnx.checker.check_model(str(path), full_check=True)
        graph = onnx.load(str(path)).graph
        inputs = {i.name: i.type.tensor_type for i in graph.input}
        for key in ("input_ids", "attention_mask", "position_ids"):
            assert inputs[key].elem_type == onnx.TensorProto.INT64, f"{name}: {key} is not int64"
        past = [d.dim_param or d.dim_value for d in inputs["past_key_values.1.value"].shape.dim]
        assert past == ["batch_size", 2, "past_sequence_length", 16]
        assert {o.name for o in graph.output} == {"logits", *(f"present.{i}.{kv}" for i in range(2)
                                                                for kv in ("key", "value"))}
        contrib = {n.op_type for n in graph.node if n.domain not in ("", "ai.onnx")}
        want = {"MatMulNBits", "GatherBlockQuantized"} if "q4" in name else set()
        assert {n.domain for n in graph.node} <= {"", "ai.onnx", "com.microsoft"} and contrib == want, \
            f"{name}: ops outside the web target's: {contrib}"
    fp32 = onnx.load(str(folder / "onnx" / "model.onnx")).graph
    weights = {i.name for i in fp32.initializer}
    weight_matmuls = sum(n.op_type == "MatMul" and n.input[1] in weights for n in fp32.node)
    for name, scales in (("model_q4.onnx", onnx.TensorProto.FLOAT), ("model_q4f16.onnx", onnx.TensorProto.FLOAT16)):
        graph = onnx.load(str(folder / "onnx" / name)).graph
        # the int4 file holds onnxruntime's 4-bit matmul, one per weight matmul of the decoder (LM head
        # included), and gathers the embedding table from its 4-bit blocks (no float32 MatMul left)
        ops = [n.op_type for n in graph.node]
        assert ops.count("MatMulNBits") == weight_matmuls > 0 and ops.count("GatherBlockQuantized") == 1, name
        assert "MatMul" not in ops and "DequantizeLinear" not in ops, name
        dtypes = {i.name: i.data_type for i in graph.initializer}
        assert {dtypes[n.input[2]] for n in graph.node if n.op_type == "MatMulNBits"} == {scales}, name
    q4f16 = onnx.load(str(folder / "onnx" / "model_q4f16.onnx"))
    typed = {v.name: v.type.tensor_type.elem_type for v in q4f16.graph.value_info}
    reads = {typed.get(n.input[0]) for n in q4f16.graph.node if n.op_type == "MatMulNBits"}
    assert reads == {onnx.TensorProto.FLOAT16}, "q4f16: MatMulNBits reads float16 activations"
    fp16 = onnx.load(str(folder / "onnx" / "model_fp16.onnx")).graph
    assert any(i.data_type == onnx.TensorProto.FLOAT16 for i in fp16.initializer)
    report = json.loads((folder / REPORT_FILE).read_text())["files"]
    assert report["model.onnx"]["largest_initializer"]["bytes"] == 128 * 64 * 4  # the embedding / head table
    assert report["model.onnx"]["over_webgpu_default_binding"] == []
    logits = report["model.onnx"]["largest_activation"]  # (1, 64, 128) float32 at a 64-token prefill
    assert logits["bytes"] == 64 * 128 * 4 and logits["shape"] == [1, 64, 128]


def test_the_webgpu_binding_report_flags_what_exceeds_it(nnx_llama, monkeypatch):
    import onnx_ir as ir

    model = ir.load(str(nnx_llama[0] / "onnx" / "model.onnx"))
    assert limits.binding_report(model, 64)["over_webgpu_default_binding"] == []
    monkeypatch.setattr(limits, "WEBGPU_DEFAULT_BINDING", 16 * 1024)  # below the 32 KiB table
    assert limits.binding_report(model, 64)["over_webgpu_default_binding"][0] == "initializer"


def test_nnx_llama_generates_the_library_tokens_in_every_dtype(nnx_llama):
    folder, reference, pad, eos = nnx_llama
    got = assert_library_tokens(folder, reference, pad, eos, dtypes=ALL)
    fp32 = got["fp32"]
    for dtype in ALL[1:]:
        tokens = got[TJS[dtype]]
        assert len(tokens) == len(PROMPTS) and all(0 <= t < 128 for row in tokens for t in row)
        same = sum(a == b for r, s in zip(tokens, fp32) for a, b in zip(r, s))
        print(f"{dtype}: {same}/{sum(map(len, fp32))} tokens as float32")  # the agreement, reported (-s)
    assert got["fp16"] == fp32, "float16 weights changed a greedy token of this tiny model"


def test_hf_flax_llama_and_its_tokenizer(tmp_path):
    from test_padding import fast_tokenizer
    from test_transformers_flax import EOS, PAD, hf_reference, make

    model = make("llama")
    tokenizer = fast_tokenizer(128, EOS)
    folder = export_causal_lm(model, tmp_path / "hf_llama", max_length=64, target="web", tokenizer=tokenizer)
    assert json.loads((folder / "config.json").read_text())["model_type"] == "llama"
    text = "w5 w17 w99 w3"
    encoded = assert_library_tokens(folder, hf_reference(model), PAD, EOS, text=text)["encoded"]
    assert encoded == tokenizer.encode(text, add_special_tokens=False)


def test_keras_hub_gpt2(tmp_path):
    from test_keras_hub import keras_reference, make

    model = make("gpt2")
    folder = export_causal_lm(model, tmp_path / "gpt2", max_length=64, target="web", bos_token_id=1, eos_token_id=127,
                              pad_token_id=0)
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "gpt2" and config["n_layer"] == 2 and config["n_head"] == 4
    assert_library_tokens(folder, keras_reference(model), 0, 127)


@pytest.mark.parametrize("family, model_type", [("gemma3", "gemma3_text"), ("llama3", "llama"), ("qwen3", "qwen3")])
def test_keras_hub_families_through_the_generic_protocol(tmp_path, family, model_type):
    """KerasHub families through the generic CausalLM protocol: config.json names the architecture the
    class is named after (transformers.js' text-only Gemma 3, Llama, Qwen 3), and the float32 file
    generates KerasHub's tokens."""
    from test_keras_hub_families import keras_reference, make

    model = make(family)
    folder = export_causal_lm(model, tmp_path / family, max_length=64, target="web", bos_token_id=1,
                              eos_token_id=127, pad_token_id=0)
    assert json.loads((folder / "config.json").read_text())["model_type"] == model_type
    assert_library_tokens(folder, keras_reference(model), 0, 127)


def test_weights_over_a_file_go_to_chunks_transformers_js_loads(tmp_path, monkeypatch, nnx_llama):
    """With the per-file limit lowered, the weights are split into model.onnx_data, model.onnx_data_1,
    ... (none over the limit), declared in config.json, and generate the same tokens; with WebGPU's binding
    size lowered, the export warns."""
    from flax import nnx
    from jax2onnx_examples.llama import Llama, LlamaConfig

    limit = 80_000
    monkeypatch.setattr(web_layout, "FILE_LIMIT", limit)
    monkeypatch.setattr(web_write, "GRAPH_MARGIN", 0)
    model = Llama(LlamaConfig(), rngs=nnx.Rngs(0))
    monkeypatch.setattr(limits, "WEBGPU_DEFAULT_BINDING", 16 * 1024)  # the 32 KiB table exceeds it: a warning
    with pytest.warns(UserWarning, match="onnx/model.onnx: the largest initializer .* exceed WebGPU's default binding"):
        folder = export_causal_lm(model, tmp_path / "chunked", max_length=64, target="web", tokenizer=False)
    chunks = sorted(p.name for p in (folder / "onnx").iterdir() if "_data" in p.name)
    count = json.loads((folder / "config.json").read_text())["transformers.js_config"]["use_external_data_format"]
    assert count == {"model.onnx": len(chunks)} and len(chunks) > 1
    assert chunks == sorted(["model.onnx_data"] + [f"model.onnx_data_{i}" for i in range(1, len(chunks))])
    assert all((folder / "onnx" / name).stat().st_size <= limit for name in chunks)
    onnx.checker.check_model(str(folder / "onnx" / "model.onnx"), full_check=True)
    assert_library_tokens(folder, nnx_llama[1], nnx_llama[2], nnx_llama[3])


def test_too_large_for_wasm_memory_is_refused_naming_a_dtype_that_fits():
    # 1.5 G weights: 6 GB in float32, 3 GB in float16 (the browser's wasm memory holds 4 GiB)
    params = {"w": jax.ShapeDtypeStruct((1_500_000, 1000), np.float32)}
    spec = DecoderSpec(step=None, params=params, num_layers=1, num_heads=1, num_kv_heads=1, head_size=8,
                       hidden_size=8, vocab_size=8)
    with pytest.raises(OptionError, match=r"precision='float32'.*over the 4 GiB.*use precision='float16'"):
        limits.check_memory(spec, web_dtypes(("int4", "float32")))
    assert limits.check_memory(spec, web_dtypes("int4"))["int4"] < limits.WASM_MEMORY


@pytest.mark.parametrize("options, message", [
    (dict(precision="int3"), "a browser folder takes"),
    (dict(precision=("int4", "int4")), "both write onnx/model_q4.onnx"),
    (dict(cache="shared"), "growing cache"),
    (dict(search={"do_sample": True}), "drop it"),
    (dict(external_data=True), "drop external_data="),
])
def test_bad_options_are_refused_before_anything_is_written(tmp_path, options, message):
    from flax import nnx
    from jax2onnx_examples.llama import Llama, LlamaConfig

    model = Llama(LlamaConfig(), rngs=nnx.Rngs(0))
    with pytest.raises(OptionError, match=message):
        export_causal_lm(model, tmp_path / "out", max_length=64, target="web", **options)
    assert not (tmp_path / "out").exists()


def test_a_precision_object_writes_its_kinds_file():
    from jax2onnx import Precision

    (dtype,) = web_dtypes(Precision("int4", lm_head="int8"))
    assert dtype.filename == "model_q4.onnx" and dtype.precision.lm_head == "int8"
    with pytest.raises(OptionError, match="calibrated int4 is not wired for a browser folder"):
        web_dtypes(Precision("int4", calibration=[np.zeros((1, 4), np.int32)]))


def test_the_graph_runs_in_onnxruntime_web_wasm(nnx_llama):
    """model.onnx (a decode step after a prefill), model_q4.onnx and model_q4f16.onnx (a prefill:
    com.microsoft MatMulNBits and GatherBlockQuantized, in float32 and float16) in onnxruntime-web's
    wasm backend (what a browser without WebGPU runs) under Node, as onnxruntime's CPU provider
    computes them."""
    import onnxruntime as ort
    from jax2onnx.targets.web.runner import run_web_many, setup_problem

    problem = setup_problem(node_modules=NODE_DIR)
    if problem is not None:
        pytest.skip(problem)
    folder = nnx_llama[0]
    ids = np.array([[5, 6, 7, 8, 9]], np.int64)
    prefill = [ids, np.ones_like(ids), np.arange(5, dtype=np.int64)[None]] + [np.zeros((1, 2, 0, 16), np.float32)] * 4
    sessions = {name: ort.InferenceSession(str(folder / "onnx" / name), providers=["CPUExecutionProvider"])
                for name in ("model.onnx", "model_q4.onnx", "model_q4f16.onnx")}
    names = [i.name for i in sessions["model.onnx"].get_inputs()]
    first = sessions["model.onnx"].run(None, dict(zip(names, prefill)))
    token = np.array([[int(np.argmax(first[0][0, -1]))]], np.int64)
    step = [token, np.ones((1, 6), np.int64), np.array([[5]], np.int64), *first[1:]]
    jobs = [("model.onnx", step), ("model_q4.onnx", prefill), ("model_q4f16.onnx", prefill)]
    web = run_web_many([(str(folder / "onnx" / name), feeds) for name, feeds in jobs], node_modules=NODE_DIR)
    assert [len(outputs) for outputs in web] == [5, 5, 5], "logits and 4 cache outputs expected of each file"
    for (name, feeds), got in zip(jobs, web, strict=True):
        expected = sessions[name].run(None, dict(zip(names, feeds)))
        for g, w in zip(got, expected, strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4, err_msg=name)


def test_a_refused_export_leaves_nothing_and_a_foreign_folder_is_kept(tmp_path, monkeypatch):
    from flax import nnx
    from jax2onnx_examples.llama import Llama, LlamaConfig

    model = Llama(LlamaConfig(), rngs=nnx.Rngs(0))
    monkeypatch.setattr(limits, "WASM_MEMORY", 1000)  # the tiny model "exceeds" the browser's memory
    with pytest.raises(OptionError, match="over the 4 GiB"):
        export_causal_lm(model, tmp_path / "out", max_length=64, target="web", tokenizer=False)
    assert list(tmp_path.iterdir()) == [], "the refused export left files behind"
    monkeypatch.undo()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep")
    with pytest.raises(OptionError, match=f"no {REPORT_FILE}"):
        export_causal_lm(model, foreign, max_length=64, target="web", tokenizer=False)
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("model_type, family, expected", [
    ("llama", "NNX Llama", "llama"),
    ("gemma", "transformers FlaxGemmaForCausalLM", "gemma"),
    ("decoder", "transformers FlaxGPT2LMHeadModel", "gpt2"),
    ("decoder", "transformers FlaxGPTNeoForCausalLM", "gpt_neo"),
    ("decoder", "KerasHub GPTNeoXCausalLM", "gpt_neox"),
    ("decoder", "KerasHub Qwen3CausalLM", "qwen3"),
    ("decoder", "KerasHub Gemma3CausalLM", "gemma3_text"),
    ("decoder", "transformers FlaxXGLMForCausalLM", "llama"),  # none in transformers.js: its plain decoder
])
def test_the_architecture_config_json_names(model_type, family, expected):
    from jax2onnx_llm.web.hf_config import hf_model_type

    spec = DecoderSpec(step=None, params={}, num_layers=1, num_heads=1, num_kv_heads=1, head_size=8, hidden_size=8,
                       vocab_size=8, model_type=model_type, family=family)
    assert hf_model_type(spec) == expected


@pytest.mark.parametrize("kind", ["llama3", "gemma"])
def test_a_keras_hub_tokenizer_encodes_alike_in_transformers_js(tmp_path, kind):
    """The tokenizer files a browser folder gets from a KerasHub tokenizer (byte-pair with a literal split,
    SentencePiece) encode text in transformers.js as KerasHub does."""
    from jax2onnx_llm.tokenizers import resolve
    from jax2onnx_llm.web.layout import write_tokenizer_files
    from test_tokenizer_strings import keras_tokenizer

    require_transformers_js()
    tokenizer = keras_tokenizer(kind, tmp_path)
    folder = tmp_path / "tok"
    folder.mkdir()
    write_tokenizer_files(resolve(tokenizer), folder, max_positions=128)
    texts = ["the quick brown fox", "a  b   c", "Grüße aus Köln, café naïve 日本語", "hello\n\nworld\t!", "0123456789 x"]
    got = node_generate(folder, (), [[1]], 0, text=json.dumps(texts))["encoded"]
    assert got == [[int(t) for t in tokenizer.tokenize(text)] for text in texts]

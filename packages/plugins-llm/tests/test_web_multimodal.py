"""``target="web"`` for the multimodal exports: the folders transformers.js loads. In Node
(``@huggingface/transformers`` from tests/web, onnxruntime-node on CPU) a tiny random-weight KerasHub
Whisper transcribes two clips in one batch, from the library's log-mel features, to exactly the
library's greedy tokens, and a tiny KerasHub PaliGemma generates exactly ``PaliGemmaCausalLM``'s greedy
tokens from the library's pixels, whose image processor (the folder's ``preprocessor_config.json``)
makes those pixels from a PNG; a perturbed encoder / vision tower (in the export only) changes the
tokens. The models are the genai tests' (test_whisper.py, test_multimodal.py); one export each."""

from __future__ import annotations

import json
import shutil
import subprocess

import numpy as np
import onnx
import pytest
from llm_test_helpers import built_once, keras_hub_under_jax
from test_web_llm import NODE_DIR, require_transformers_js

keras, keras_hub = keras_hub_under_jax()

from jax2onnx_llm import OptionError, UnsupportedModelError  # noqa: E402
from jax2onnx_llm.multimodal import export_multimodal_lm, export_speech_to_text  # noqa: E402
from jax2onnx_llm.multimodal.report import folder_report  # noqa: E402
from jax2onnx_llm.web import REPORT_FILE  # noqa: E402
from test_multimodal import NEW_TOKENS as IMAGE_NEW_TOKENS  # noqa: E402
from test_multimodal import PROMPT, VOCAB, _converter, _images, _rgb, _write_png, session_library_tokens  # noqa: E402
from test_multimodal import _model as paligemma_model  # noqa: E402
from test_multimodal import _tokenizer as letters_tokenizer  # noqa: E402
from test_whisper import NEW_TOKENS, _backbone, _features, _library_greedy, _prompt, _tokenizer, _until_end  # noqa: E402

RUNNER = NODE_DIR / "transformers_multimodal.mjs"
#: one folder per model holds float32 files and the float16 encoder / int4 decoder beside them
WHISPER_DTYPES = {"encoder": ("float32", "float16"), "decoder": ("float32", "int4")}
VISION_DTYPES = {"vision": ("float32", "float16"), "decoder": ("float32", "int4")}


def node_request(tmp_path, kind: str, folder, inputs: np.ndarray, prompt: list[list[int]], max_new_tokens: int,
                 image=None, dtype="fp32") -> dict:
    """One request for ``transformers_multimodal.mjs`` (``inputs``: features or pixels, passed as raw float32;
    ``dtype``: one for every session or one per session)."""
    data = tmp_path / f"{kind}_{len(list(tmp_path.glob('*.bin')))}.bin"
    np.ascontiguousarray(inputs, "<f4").tofile(data)
    return {"kind": kind, "folder": str(folder), "inputs": str(data), "dims": list(inputs.shape), "prompt": prompt,
            "max_new_tokens": max_new_tokens, "image": None if image is None else str(image), "dtype": dtype}


def node_runs(tmp_path, requests: list[dict]) -> list[dict]:
    """What ``transformers_multimodal.mjs`` returns for each request, all run in one Node process."""
    require_transformers_js()
    (tmp_path / "request.json").write_text(json.dumps({"runs": requests}))
    run = subprocess.run(["node", str(RUNNER), str(tmp_path / "request.json")], cwd=NODE_DIR, capture_output=True,
                         text=True, timeout=300)
    assert run.returncode == 0, f"transformers.js failed:\n{run.stderr[-3000:]}"
    return json.loads(run.stdout.strip().splitlines()[-1])["runs"]


def node_generate(tmp_path, kind: str, folder, inputs: np.ndarray, prompt: list[list[int]], max_new_tokens: int,
                  image=None) -> dict:
    """What ``transformers_multimodal.mjs`` returns for ``inputs`` with the float32 files."""
    return node_runs(tmp_path, [node_request(tmp_path, kind, folder, inputs, prompt, max_new_tokens, image)])[0]


def ort_vision_language_greedy(folder, files: dict[str, str], pixels: np.ndarray, rows: list[list[int]],
                               max_new_tokens: int) -> list[list[int]]:
    """transformers.js' vision-language loop (LLaVA's: embed the ids, write the vision encoder's features
    over the image token's rows in order, greedy steps over a growing cache) in onnxruntime (Python) on
    the folder's files named per session (``{"decoder_model_merged": "decoder_model_merged_q4"}``; the
    float32 file where none is named): the tokens a dtype's files give, to compare transformers.js' with."""
    import onnxruntime as ort

    image_token = json.loads((folder / "config.json").read_text())["image_token_index"]
    sessions = {name: ort.InferenceSession(str(folder / "onnx" / f"{files.get(name, name)}.onnx"),
                                           providers=["CPUExecutionProvider"])
                for name in ("vision_encoder", "embed_tokens", "decoder_model_merged")}
    features = sessions["vision_encoder"].run(None, {"pixel_values": pixels})[0]
    ids = np.asarray(rows, np.int64)
    embeds = sessions["embed_tokens"].run(None, {"input_ids": ids})[0]
    embeds[ids == image_token] = features.reshape(-1, features.shape[-1])  # row after row, as transformers.js
    decoder = sessions["decoder_model_merged"]
    past = {i.name: np.zeros([len(rows) if d == "batch_size" else 0 if isinstance(d, str) else d for d in i.shape],
                             np.float16 if "float16" in i.type else np.float32)
            for i in decoder.get_inputs() if i.name.startswith("past_key_values")}
    length, tokens = ids.shape[1], []
    for _ in range(max_new_tokens):
        logits, *present = decoder.run(None, {"inputs_embeds": embeds, "attention_mask": np.ones((len(rows), length),
                                                                                                 np.int64), **past})
        tokens.append(logits[:, -1].argmax(-1))
        past = dict(zip(past, present))  # present.N.key/value in past_key_values.N's order
        embeds = sessions["embed_tokens"].run(None, {"input_ids": tokens[-1][:, None].astype(np.int64)})[0]
        length += 1
    return np.stack(tokens, 1).tolist()


def graph_io(path) -> tuple[dict, list[str]]:
    """A graph's inputs (name -> (elem type, dims)) and output names, after onnx's full check."""
    onnx.checker.check_model(str(path), full_check=True)
    graph = onnx.load(str(path)).graph
    inputs = {i.name: (i.type.tensor_type.elem_type, [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim])
              for i in graph.input}
    return inputs, [o.name for o in graph.output]


def ort_whisper_greedy(folder, files: dict[str, str], features: np.ndarray, rows: list[list[int]],
                       max_new_tokens: int) -> list[list[int]]:
    """transformers.js' Whisper loop in onnxruntime (Python) on the files named per session (as
    :func:`ort_vision_language_greedy`): the encoder once, then the merged decoder, its first step
    projecting the cross cache (``use_cache_branch`` false, empty caches), later ones reading it back."""
    import onnxruntime as ort

    encoder, decoder = (ort.InferenceSession(str(folder / "onnx" / f"{files.get(name, name)}.onnx"),
                                             providers=["CPUExecutionProvider"])
                        for name in ("encoder_model", "decoder_model_merged"))
    states = encoder.run(None, {"input_features": features})[0]
    past = {i.name: np.zeros([len(rows) if d == "batch_size" else 0 if isinstance(d, str) else d for d in i.shape],
                             np.float32) for i in decoder.get_inputs() if i.name.startswith("past_key_values")}
    ids, tokens = np.asarray(rows, np.int64), []
    for step in range(max_new_tokens):
        logits, *present = decoder.run(None, {"input_ids": ids, "encoder_hidden_states": states, **past,
                                              "use_cache_branch": np.asarray([step > 0])})
        tokens.append(logits[:, -1].argmax(-1))
        past, ids = dict(zip(past, present)), tokens[-1][:, None].astype(np.int64)
    return np.stack(tokens, 1).tolist()


# -- Whisper ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def whisper():
    """(tokenizer, folder, features (2, 3000, 80), the library's greedy tokens per clip, backbone)."""
    tokenizer = _tokenizer()
    backbone = _backbone(tokenizer.vocabulary_size())

    def build(root):  # once per session, not per xdist worker
        features = _features()
        export_speech_to_text(backbone, root / "whisper", tokenizer=tokenizer, target="web", precision=WHISPER_DTYPES)
        return features, _library_greedy(backbone, features, [_prompt(tokenizer, True)])[0]

    root, (features, expected) = built_once("test_web_multimodal-whisper", build)
    return tokenizer, root / "whisper", features, expected, backbone


def test_whisper_folder_is_optimums_layout(whisper):
    tokenizer, folder, *_ = whisper
    assert sorted(p.name for p in (folder / "onnx").iterdir()) == [
        "decoder_model_merged.onnx", "decoder_model_merged_q4.onnx", "encoder_model.onnx", "encoder_model_fp16.onnx"]
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["decoder_layers"], config["decoder_attention_heads"]) == ("whisper", 2, 4)
    generation = json.loads((folder / "generation_config.json").read_text())
    assert generation["decoder_start_token_id"] == tokenizer.bos_token_id
    assert generation["no_timestamps_token_id"] == tokenizer.no_timestamps_token_id
    assert json.loads((folder / "preprocessor_config.json").read_text())["feature_size"] == 80
    assert (folder / "tokenizer.json").exists() and (folder / REPORT_FILE).exists()
    inputs, outputs = graph_io(folder / "onnx" / "encoder_model.onnx")
    assert inputs == {"input_features": (onnx.TensorProto.FLOAT, ["batch_size", 80, 3000])}
    assert outputs == ["last_hidden_state"]
    inputs, outputs = graph_io(folder / "onnx" / "decoder_model_merged.onnx")
    per_layer = [f"{i}.{part}.{kv}" for i in range(2) for part in ("decoder", "encoder") for kv in ("key", "value")]
    assert list(inputs) == ["input_ids", "encoder_hidden_states", *(f"past_key_values.{n}" for n in per_layer),
                            "use_cache_branch"]
    assert outputs == ["logits", *(f"present.{n}" for n in per_layer)]
    assert inputs["input_ids"][0] == onnx.TensorProto.INT64 and inputs["use_cache_branch"] == (onnx.TensorProto.BOOL, [1])
    # the cross cache's length is the encoder output's (transformers.js starts it empty: an unknown dim is 0)
    assert inputs["past_key_values.1.encoder.value"][1] == ["batch_size", 4, "encoder_sequence_length", 16]
    assert inputs["encoder_hidden_states"][1] == ["batch_size", "encoder_sequence_length", 64]
    assert inputs["past_key_values.1.decoder.key"][1] == ["batch_size", 4, "past_sequence_length", 16]


def test_whisper_transcribes_two_clips_to_the_library_tokens_in_transformers_js(whisper, tmp_path):
    """One batch of two clips of different lengths, fed as the library's log-mel features (mels first,
    as transformers.js' feature extractor writes them) with the library's prompt."""
    tokenizer, folder, features, expected, _ = whisper
    assert expected[0] != expected[1], "the clip does not change the library's tokens: the test would prove little"
    prompt = _prompt(tokenizer, True)
    got = node_generate(tmp_path, "whisper", folder, np.swapaxes(features, 1, 2), [prompt, prompt], NEW_TOKENS)
    end = tokenizer.eos_token_id
    assert [_until_end(row, end) for row in got["tokens"]] == [_until_end(row, end) for row in expected]


def test_a_perturbed_whisper_encoder_transcribes_other_tokens(whisper, tmp_path):
    """The comparison above can fail: the encoder's first convolution perturbed (in the export only)."""
    tokenizer, folder, features, expected, _ = whisper
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    path = broken / "onnx" / "encoder_model.onnx"
    encoder = onnx.load(str(path))
    kernel = next(t for t in encoder.graph.initializer if len(t.dims) == 3 and 80 in t.dims)  # conv 1: 80 mels in
    values = onnx.numpy_helper.to_array(kernel)
    noise = np.random.RandomState(1).normal(0, 1, values.shape).astype(values.dtype)
    kernel.CopyFrom(onnx.numpy_helper.from_array(values + noise, kernel.name))
    onnx.save(encoder, str(path))
    prompt = _prompt(tokenizer, True)
    got = node_generate(tmp_path, "whisper", broken, np.swapaxes(features, 1, 2), [prompt, prompt], NEW_TOKENS)
    end = tokenizer.eos_token_id
    assert [_until_end(row, end) for row in got["tokens"]] != [_until_end(row, end) for row in expected]


def test_whisper_float16_encoder_and_int4_decoder_in_transformers_js(whisper, tmp_path):
    """precision= per sub-model: transformers.js picks the ``_fp16`` encoder and ``_q4`` decoder by its
    per-session dtype map. With the float16 encoder it transcribes exactly the library's tokens (the
    rounding moves no argmax of this model); the int4 decoder's rounding turns near-ties of the tiny
    random model, so its tokens are checked against onnxruntime's greedy loop over the same files
    (exact: the same kernels); the report names each file's precision, size and fused ops."""
    tokenizer, folder, features, expected, _ = whisper
    report = folder_report(folder, REPORT_FILE)
    assert report["encoder_model_fp16"]["precision"] == "float16" and report["decoder_model_merged_q4"]["dtype"] == "q4"
    assert report["encoder_model_fp16"]["bytes"] < report["encoder_model"]["bytes"]
    assert report["decoder_model_merged_q4"]["bytes"] < report["decoder_model_merged"]["bytes"]
    assert report["decoder_model_merged_q4"]["fused_ops"]["com.microsoft.MatMulNBits"] > 0
    mels, prompt, end = np.swapaxes(features, 1, 2), _prompt(tokenizer, True), tokenizer.eos_token_id
    mixed = {"encoder_model": "fp16", "decoder_model_merged": "q4"}
    half, quarter = node_runs(tmp_path, [
        node_request(tmp_path, "whisper", folder, mels, [prompt, prompt], NEW_TOKENS, dtype={"encoder_model": "fp16"}),
        node_request(tmp_path, "whisper", folder, mels, [prompt, prompt], NEW_TOKENS, dtype=mixed)])
    assert [_until_end(row, end) for row in half["tokens"]] == [_until_end(row, end) for row in expected]
    want = ort_whisper_greedy(folder, {k: f"{k}_{v}" for k, v in mixed.items()}, mels, [prompt, prompt], NEW_TOKENS)
    assert [_until_end(row, end) for row in quarter["tokens"]] == [_until_end(row, end) for row in want]


def test_the_merged_whisper_decoder_runs_in_onnxruntime_web_wasm(whisper):
    """The merged decoder's first step (its ``If`` projecting the cross cache from ``encoder_hidden_states``;
    loading the graph resolves both branches' kernels) in onnxruntime-web's wasm backend (a browser without
    WebGPU) under Node, as onnxruntime's CPU provider computes it. One run: each starts the wasm runtime
    afresh (seconds); the cache steps run in onnxruntime-node through transformers.js above."""
    import onnxruntime as ort
    from jax2onnx.targets.web.runner import run_web, setup_problem

    problem = setup_problem(node_modules=NODE_DIR)
    if problem is not None:
        pytest.skip(problem)
    tokenizer, folder, *_ = whisper
    path = folder / "onnx" / "decoder_model_merged.onnx"
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    states = np.random.RandomState(0).normal(0, 1, (1, 1500, 64)).astype(np.float32)
    empty = np.zeros((1, 4, 0, 16), np.float32)
    first = [np.asarray([_prompt(tokenizer, True)], np.int64), states, *[empty] * 8, np.asarray([False])]
    expected = session.run(None, dict(zip(names, first)))
    got = run_web(str(path), first, node_modules=NODE_DIR)
    assert [g.shape for g in got] == [w.shape for w in expected]
    assert got[3].shape == (1, 4, 1500, 16)  # present.0.encoder.value: the projected cross cache
    for g, w in zip(got, expected, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


# -- PaliGemma --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def paligemma():
    """(folder, {image index: KerasHub's greedy tokens}) for test_multimodal's two images."""
    model = paligemma_model()

    def build(root):  # once per session, not per xdist worker
        expected, eos = session_library_tokens(model)  # test_multimodal's: KerasHub's tokens for its two images
        export_multimodal_lm(model, root / "paligemma", max_length=32, target="web", eos_token_id=eos, pad_token_id=0,
                             tokenizer=letters_tokenizer(root / "tokenizer"), image_converter=_converter(),
                             precision=VISION_DTYPES)
        return expected

    root, expected = built_once("test_web_multimodal-paligemma", build)
    return model, root / "paligemma", expected


def _image_prompt(folder) -> list[int]:
    """The image's slots (the folder's image token, which transformers.js overwrites with the image's
    features), then the text."""
    config = json.loads((folder / "config.json").read_text())
    return [config["image_token_index"]] * config["vision_config"]["num_image_tokens"] + PROMPT


def _channels_first(pixels: np.ndarray) -> np.ndarray:
    return np.transpose(pixels, (0, 3, 1, 2))


def test_paligemma_folder_is_transformers_js_layout(paligemma):
    _, folder, _ = paligemma
    names = ["decoder_model_merged.onnx", "decoder_model_merged_q4.onnx", "embed_tokens.onnx", "vision_encoder.onnx",
             "vision_encoder_fp16.onnx"]
    assert sorted(p.name for p in (folder / "onnx").iterdir()) == names
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "paligemma" and config["image_token_index"] == VOCAB
    assert config["text_config"]["num_hidden_layers"] == 2 and config["text_config"]["num_key_value_heads"] == 1
    tokenizer = json.loads((folder / "tokenizer.json").read_text())
    assert {"id": VOCAB, "content": "<image>"}.items() <= next(
        t for t in tokenizer["added_tokens"] if t["content"] == "<image>").items()
    processor = json.loads((folder / "preprocessor_config.json").read_text())
    assert processor["size"] == {"height": 28, "width": 28} and processor["image_seq_length"] == 4
    inputs, outputs = graph_io(folder / "onnx" / "vision_encoder.onnx")
    assert inputs == {"pixel_values": (onnx.TensorProto.FLOAT, ["num_images", 3, 28, 28])}
    assert outputs == ["image_features"]
    inputs, outputs = graph_io(folder / "onnx" / "embed_tokens.onnx")
    assert inputs == {"input_ids": (onnx.TensorProto.INT64, ["batch_size", "sequence_length"])}
    assert outputs == ["inputs_embeds"]
    inputs, outputs = graph_io(folder / "onnx" / "decoder_model_merged.onnx")
    assert list(inputs)[:2] == ["inputs_embeds", "attention_mask"] and "position_ids" not in inputs
    assert inputs["attention_mask"][0] == onnx.TensorProto.INT64
    assert inputs["past_key_values.1.value"][1] == ["batch_size", 1, "past_sequence_length", 8]
    assert outputs == ["logits", *(f"present.{i}.{kv}" for i in range(2) for kv in ("key", "value"))]


def test_paligemma_generates_the_library_tokens_in_transformers_js(paligemma, tmp_path):
    """Each image's library pixels, and the pixels the folder's image processor makes from a PNG of the
    first (the converter's, to float rounding); its tokenizer encodes ``<image>`` as the image token."""
    _, folder, expected = paligemma
    assert expected[0] != expected[1], "the image does not change KerasHub's tokens: the test would prove little"
    image = tmp_path / "image.png"
    _write_png(image, _rgb(0))
    for i, pixels in enumerate(_images()):
        got = node_generate(tmp_path, "paligemma", folder, _channels_first(pixels), [_image_prompt(folder)],
                            IMAGE_NEW_TOKENS, image=image if i == 0 else None)
        assert got["tokens"] == [expected[i]], f"image {i}"
        if i == 0:
            made = np.asarray(got["pixel_values"]["data"], np.float32).reshape(got["pixel_values"]["dims"])
            np.testing.assert_allclose(made, _channels_first(pixels), atol=1e-6)
            assert got["image_token_ids"] == [VOCAB, VOCAB], "the folder's tokenizer does not encode <image>"


def test_a_perturbed_vision_encoder_generates_other_tokens(paligemma, tmp_path):
    """The comparison above can fail: the vision graph's patch embedding perturbed (in the export only)."""
    _, folder, expected = paligemma
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    path = broken / "onnx" / "vision_encoder.onnx"
    vision = onnx.load(str(path))
    kernel = max((t for t in vision.graph.initializer if len(t.dims) == 4), key=lambda t: np.prod(t.dims))
    values = onnx.numpy_helper.to_array(kernel)
    noise = np.random.RandomState(1).normal(0, 1, values.shape).astype(values.dtype)
    kernel.CopyFrom(onnx.numpy_helper.from_array(values + noise, kernel.name))
    onnx.save(vision, str(path))
    got = node_generate(tmp_path, "paligemma", broken, _channels_first(_images()[0]), [_image_prompt(folder)],
                        IMAGE_NEW_TOKENS)
    assert got["tokens"] != [expected[0]]


def test_paligemma_float16_vision_and_int4_decoder_in_transformers_js(paligemma, tmp_path):
    """As Whisper's: the ``_fp16`` vision encoder generates the library's tokens, the ``_q4`` decoder
    onnxruntime's greedy tokens over the same files; the report's sizes and fused ops."""
    _, folder, expected = paligemma
    report = folder_report(folder, REPORT_FILE)
    assert report["vision_encoder_fp16"]["bytes"] < report["vision_encoder"]["bytes"]
    assert report["decoder_model_merged_q4"]["fused_ops"]["com.microsoft.MatMulNBits"] > 0
    pixels, prompt = _channels_first(_images()[0]), [_image_prompt(folder)]
    mixed = {"vision_encoder": "fp16", "decoder_model_merged": "q4"}
    half, quarter = node_runs(tmp_path, [
        node_request(tmp_path, "paligemma", folder, pixels, prompt, IMAGE_NEW_TOKENS, dtype={"vision_encoder": "fp16"}),
        node_request(tmp_path, "paligemma", folder, pixels, prompt, IMAGE_NEW_TOKENS, dtype=mixed)])
    assert half["tokens"] == [expected[0]]
    end = json.loads((folder / "generation_config.json").read_text())["eos_token_id"]
    want = ort_vision_language_greedy(folder, {k: f"{k}_{v}" for k, v in mixed.items()}, pixels, prompt,
                                      IMAGE_NEW_TOKENS)
    assert [_until_end(row, end) for row in quarter["tokens"]] == [_until_end(row, end) for row in want]


def test_web_options_a_browser_folder_does_not_take_are_refused(paligemma, whisper, tmp_path, monkeypatch):
    from jax2onnx_llm.frontends.keras_hub import pali_gemma

    model = paligemma[0]
    with pytest.raises(OptionError, match="cache='concat'"):
        export_multimodal_lm(model, tmp_path / "shared", max_length=32, target="web", cache="shared", tokenizer=False,
                             eos_token_id=1)
    with pytest.raises(OptionError, match="search="):
        export_multimodal_lm(model, tmp_path / "search", max_length=32, target="web", search={"top_k": 1},
                             tokenizer=False, eos_token_id=1)
    with pytest.raises(OptionError, match="external_data="):
        export_speech_to_text(whisper[4], tmp_path / "whisper", tokenizer=whisper[0], target="web", external_data=True)
    # precision= per sub-model under the genai sections' names, each value one of the browser dtypes, each file once
    with pytest.raises(OptionError, match=r"precision= names \['vision_encoder'\]"):
        export_multimodal_lm(model, tmp_path / "names", max_length=32, target="web", tokenizer=False, eos_token_id=1,
                             precision={"vision_encoder": "float16"})
    with pytest.raises(OptionError, match="q4f16"):
        export_speech_to_text(whisper[4], tmp_path / "whisper", tokenizer=whisper[0], target="web",
                              precision={"decoder": "bfloat16"})
    with pytest.raises(OptionError, match="give each dtype once"):
        export_speech_to_text(whisper[4], tmp_path / "whisper", tokenizer=whisper[0], target="web",
                              precision=("int4", "int4"))
    with pytest.raises(OptionError, match=r"target='qdq'.*transformers.js \(\['web'\]\)"):
        export_speech_to_text(whisper[4], tmp_path / "whisper", tokenizer=whisper[0], target="qdq")
    # a vision-language model whose front-end names no transformers.js architecture (a later family)
    monkeypatch.delattr(pali_gemma, "TRANSFORMERS_JS_MODEL_TYPE")
    with pytest.raises(UnsupportedModelError, match="genai target"):
        export_multimodal_lm(model, tmp_path / "other", max_length=32, target="web", tokenizer=False, eos_token_id=1)
    assert not any((tmp_path / name).exists() for name in ("shared", "search", "whisper", "other", "names"))

"""``export_multimodal_lm(..., target="web")`` on test_multimodal_gemma3's tiny KerasHub Gemma3CausalLM
with its vision encoder: the folder transformers.js 4's ``Gemma3ForConditionalGeneration`` loads. In
Node (one process for every run) a batch of two prompts, one image each, generates exactly KerasHub's
greedy tokens from the library's pixels, also with the ``_fp16`` vision encoder; with the ``_q4``
decoder it generates onnxruntime's greedy tokens over the same files; a perturbed vision tower (in
the export only) generates others; the decoder reads the image flag. One export (float32 files plus
the float16 / int4 twins)."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from llm_test_helpers import built_once, keras_hub_under_jax
from test_web_multimodal import graph_io, node_request, node_runs, ort_vision_language_greedy

keras, keras_hub = keras_hub_under_jax()

from jax2onnx_llm.multimodal import export_multimodal_lm  # noqa: E402
from jax2onnx_llm.multimodal.report import folder_report  # noqa: E402
from jax2onnx_llm.web import REPORT_FILE  # noqa: E402
from test_multimodal_gemma3 import (  # noqa: E402
    IMAGE,
    NEW_TOKENS,
    SIZE,
    VOCAB,
    _converter,
    _images,
    prompt_and_library_tokens,
    tiny_model,
)
from test_whisper import _until_end  # noqa: E402

DTYPES = {"vision": ("float32", "float16"), "decoder": ("float32", "int4")}
MIXED = {"vision_encoder": "fp16", "decoder_model_merged": "q4"}
HIDDEN = 32  # the tiny model's width; the folder's rows are one wider (the image flag)


@pytest.fixture(scope="module")
def runs():
    """(folder, prompt, KerasHub's tokens per image, eos, transformers.js' results: float32, float16
    vision, float16 vision + int4 decoder, float32 with a perturbed vision tower), made once per session."""
    prompt, expected = prompt_and_library_tokens()  # test_multimodal_gemma3's, computed once per session
    eos = next(t for t in range(1, VOCAB) if t not in {t for row in expected for t in row})

    def build(root):
        folder = export_multimodal_lm(tiny_model(), root / "gemma3", max_length=40, target="web", tokenizer=False,
                                      eos_token_id=eos, pad_token_id=0, image_token_id=IMAGE,
                                      image_converter=_converter(), precision=DTYPES)
        broken = root / "broken"
        shutil.copytree(folder, broken)
        path = broken / "onnx" / "vision_encoder.onnx"
        vision = onnx.load(str(path))
        kernel = max((t for t in vision.graph.initializer if len(t.dims) == 4), key=lambda t: np.prod(t.dims))
        values = onnx.numpy_helper.to_array(kernel)  # the patch embedding
        kernel.CopyFrom(onnx.numpy_helper.from_array(values + np.random.RandomState(1).normal(0, 1, values.shape)
                                                     .astype(values.dtype), kernel.name))
        onnx.save(vision, str(path))
        pixels, rows = np.transpose(_images(), (0, 3, 1, 2)), [prompt, prompt]
        return node_runs(root, [node_request(root, "gemma3", where, pixels, rows, NEW_TOKENS, dtype=dtype)
                                for where, dtype in ((folder, "fp32"), (folder, {"vision_encoder": "fp16"}),
                                                     (folder, MIXED), (broken, "fp32"))])

    root, results = built_once("test_web_multimodal_gemma3", build)
    return root / "gemma3", prompt, expected, eos, results


def test_folder_is_transformers_js_gemma3_layout(runs):
    folder, *_ = runs
    names = ["decoder_model_merged.onnx", "decoder_model_merged_q4.onnx", "embed_tokens.onnx", "vision_encoder.onnx",
             "vision_encoder_fp16.onnx"]
    assert sorted(p.name for p in (folder / "onnx").iterdir()) == names
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["image_token_index"], config["text_config"]["model_type"]) == (
        "gemma3", IMAGE, "gemma3_text")
    assert config["transformers.js_config"]["dtype"] == {
        "vision_encoder": "fp32", "embed_tokens": "fp32", "decoder_model_merged": "fp32"}
    processor = json.loads((folder / "preprocessor_config.json").read_text())
    assert processor["image_processor_type"] == "Gemma3ImageProcessor" and processor["size"]["height"] == SIZE
    inputs, outputs = graph_io(folder / "onnx" / "vision_encoder_fp16.onnx")
    assert inputs == {"pixel_values": (onnx.TensorProto.FLOAT, ["num_images", 3, SIZE, SIZE])}  # float32 I/O
    inputs, outputs = graph_io(folder / "onnx" / "embed_tokens.onnx")
    assert inputs == {"input_ids": (onnx.TensorProto.INT64, ["batch_size", "sequence_length"])}
    inputs, outputs = graph_io(folder / "onnx" / "decoder_model_merged_q4.onnx")
    assert list(inputs)[:2] == ["inputs_embeds", "attention_mask"] and "input_ids" not in inputs
    assert inputs["inputs_embeds"][1] == ["batch_size", "sequence_length", HIDDEN + 1]  # the image flag
    report = folder_report(folder, REPORT_FILE)
    assert report["vision_encoder_fp16"]["bytes"] < report["vision_encoder"]["bytes"]
    assert report["decoder_model_merged_q4"]["bytes"] < report["decoder_model_merged"]["bytes"]
    assert report["decoder_model_merged_q4"]["fused_ops"]["com.microsoft.MatMulNBits"] > 0
    assert "com.microsoft.MatMulNBits" not in report["decoder_model_merged"]["fused_ops"]


def test_two_prompts_generate_the_library_tokens_in_transformers_js(runs):
    """One batch of two prompts with an image each, from the library's pixels (channels first), with
    the float32 files and with the float16 vision encoder (its rounding moves no argmax here)."""
    _, _, expected, _, (full, half, _, _) = runs
    assert expected[0] != expected[1], "the image does not change KerasHub's tokens: the test would prove little"
    assert full["tokens"] == expected
    assert half["tokens"] == expected


def test_int4_decoder_generates_onnxruntimes_tokens_over_its_files(runs):
    """The int4 decoder's rounding turns near-ties of the tiny random model (its tokens leave float32's),
    so transformers.js' are checked against onnxruntime's greedy loop over the same files."""
    folder, prompt, _, eos, (_, _, mixed, _) = runs
    want = ort_vision_language_greedy(folder, {k: f"{k}_{v}" for k, v in MIXED.items()},
                                      np.transpose(_images(), (0, 3, 1, 2)), [prompt, prompt], NEW_TOKENS)
    assert [_until_end(row, eos) for row in mixed["tokens"]] == [_until_end(row, eos) for row in want]


def test_a_perturbed_vision_tower_generates_other_tokens(runs):
    """The comparison above can fail: the vision graph's patch embedding perturbed in the export only."""
    _, _, expected, _, (*_, broken) = runs
    assert broken["tokens"] != expected


def test_the_decoder_reads_the_image_flag(runs):
    """KerasHub's two-way attention among an image's placeholders reaches the decoder only through the
    flag channel. The tiny model's greedy tokens do not tell it from causal attention, so the prompt's
    logits do: with the flag cleared in the image rows they move (by about 1 here; with it they are
    KerasHub's backbone's to 1e-5, measured once, not in the suite: its eager call takes seconds)."""
    import onnxruntime as ort

    folder, prompt, *_ = runs
    sessions = {name: ort.InferenceSession(str(folder / "onnx" / f"{name}.onnx"), providers=["CPUExecutionProvider"])
                for name in ("vision_encoder", "embed_tokens", "decoder_model_merged")}
    features = sessions["vision_encoder"].run(None, {"pixel_values": np.transpose(_images(), (0, 3, 1, 2))})[0]
    assert np.all(features[..., -1] == 1.0)  # the flag the vision encoder writes
    ids = np.asarray([prompt, prompt], np.int64)
    decoder = sessions["decoder_model_merged"]
    empty = {i.name: np.zeros((2, 1, 0, 8), np.float32) for i in decoder.get_inputs() if i.name.startswith("past")}

    def prompt_logits(flag: float) -> np.ndarray:
        embeds = sessions["embed_tokens"].run(None, {"input_ids": ids})[0]
        assert np.all(embeds[..., -1] == 0.0)  # text rows: no flag
        rows = features.reshape(-1, features.shape[-1]).copy()
        rows[:, -1] = flag
        embeds[ids == IMAGE] = rows
        return decoder.run(None, {"inputs_embeds": embeds, "attention_mask": np.ones(ids.shape, np.int64), **empty})[0]

    assert np.abs(prompt_logits(1.0) - prompt_logits(0.0)).max() > 0.1

"""export_speech_to_text on KerasHub Moonshine (raw audio in, no log-mel): a tiny random-weight
``MoonshineAudioToText`` written for transformers.js (``target="web"``) transcribes, in Node, a batch
of two clips of different lengths (zero-padded) to exactly the tokens KerasHub's own greedy
``generate`` gives for that batch with the padding mask its preprocessor makes (the samples equal to
0.0), which differ from those without a mask (so the graphs mask the padding). The onnxruntime-genai
folder (genai's ``whisper`` state fed the audio in rows of 3000 samples) transcribes the same batch to
the same tokens. One export per layout for the module; the tokenizer is a SentencePiece model trained here."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import onnx
import pytest
from llm_test_helpers import built_once, keras_hub_under_jax, require_genai

keras, keras_hub = keras_hub_under_jax()

from jax2onnx_llm import OptionError, UnsupportedModelError, export_causal_lm  # noqa: E402
from jax2onnx_llm.multimodal import export_speech_to_text, transcribe  # noqa: E402
from jax2onnx_llm.multimodal.whisper import DECODER_FILE, ENCODER_FILE  # noqa: E402
from jax2onnx_llm.web import REPORT_FILE  # noqa: E402
from test_tokenizer_strings import sentencepiece_model  # noqa: E402
from test_web_multimodal import graph_io, node_generate  # noqa: E402
from test_whisper import _until_end  # noqa: E402

NEW_TOKENS = 6
#: the two clips' lengths in samples (16 kHz): 0.75 s and 0.5 s, padded to the longer
LENGTHS = (12000, 8000)


def tokenizer(tmp_path: pathlib.Path):
    """A Llama-style SentencePiece BPE (``<unk> <s> </s>`` at 0-2) as KerasHub's MoonshineTokenizer."""
    return keras_hub.models.MoonshineTokenizer(proto=pathlib.Path(sentencepiece_model(tmp_path, gemma=False)).read_bytes())


def model(vocabulary_size: int):
    """A tiny random-weight MoonshineAudioToText (1 encoder and 2 decoder layers, width 32), compiled
    for greedy generation; its kernels scaled up threefold so the transcripts vary with the audio."""
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.MoonshineBackbone(
        vocabulary_size=vocabulary_size, filter_dim=32, encoder_num_layers=1, decoder_num_layers=2, hidden_dim=32,
        intermediate_dim=32, encoder_num_heads=2, decoder_num_heads=2, feedforward_expansion_factor=2)
    for v in backbone.weights:
        if "kernel" in v.path:
            v.assign(v.numpy() * 3.0)
    audio_to_text = keras_hub.models.MoonshineAudioToText(backbone=backbone, preprocessor=None)
    audio_to_text.compile(sampler="greedy")
    return audio_to_text


def clips() -> tuple[np.ndarray, np.ndarray]:
    """Two clips (modulated tones with a little noise) zero-padded to the longer, and the padding mask
    KerasHub's preprocessor makes for them (``MoonshineAudioToTextPreprocessor``: samples != 0.0)."""
    rng = np.random.RandomState(0)
    audio = np.zeros((2, max(LENGTHS)), np.float32)
    for row, (n, hz) in enumerate(zip(LENGTHS, (300.0, 800.0))):
        t = np.arange(n) / 16000
        audio[row, :n] = 0.5 * np.sin(2 * np.pi * hz * t) * np.sin(2 * np.pi * 3 * t) + 0.05 * rng.randn(n)
    mask = audio != 0.0
    assert mask.sum(axis=1).tolist() == list(LENGTHS)  # no sample of a clip is exactly 0.0
    return audio, mask


def library_tokens(audio_to_text, audio: np.ndarray, mask: np.ndarray, start: int) -> list[list[int]]:
    """KerasHub's greedy ``generate`` on the preprocessed batch (the start token, then ``NEW_TOKENS``)."""
    ids = np.zeros((len(audio), 1 + NEW_TOKENS), np.int32)
    ids[:, 0] = start
    out = audio_to_text.generate({"encoder_input_values": audio[..., None], "encoder_padding_mask": mask,
                                  "decoder_token_ids": ids, "decoder_padding_mask": ids != 0}, stop_token_ids=None)
    return np.asarray(out["decoder_token_ids"])[:, 1:].tolist()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(model, tokenizer, web folder, audio, the library's greedy tokens per clip with the padding
    masked, and without a mask)."""
    tok = tokenizer(tmp_path_factory.mktemp("spm"))
    audio_to_text = model(tok.vocabulary_size())
    audio, mask = clips()

    def build(root):  # once per session, not per xdist worker
        expected = library_tokens(audio_to_text, audio, mask, tok.start_token_id)
        unmasked = library_tokens(audio_to_text, audio, np.ones_like(mask), tok.start_token_id)  # the same compiled step
        export_speech_to_text(audio_to_text, root / "moonshine", tokenizer=tok, target="web", max_length=64)
        return expected, unmasked

    root, (expected, unmasked) = built_once("test_moonshine-web", build)
    return audio_to_text, tok, root / "moonshine", audio, expected, unmasked


def test_folder_is_transformers_js_moonshine_layout(exported):
    _, tok, folder, *_ = exported
    assert sorted(p.name for p in (folder / "onnx").iterdir()) == ["decoder_model_merged.onnx", "encoder_model.onnx"]
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["decoder_num_hidden_layers"], config["decoder_num_key_value_heads"]) == (
        "moonshine", 2, 2)
    generation = json.loads((folder / "generation_config.json").read_text())
    assert (generation["decoder_start_token_id"], generation["eos_token_id"]) == (tok.start_token_id, tok.end_token_id)
    assert (folder / "tokenizer.json").exists() and (folder / REPORT_FILE).exists()
    inputs, outputs = graph_io(folder / "onnx" / "encoder_model.onnx")
    assert inputs == {"input_values": (onnx.TensorProto.FLOAT, ["batch_size", "num_samples"])}
    assert outputs == ["last_hidden_state"]
    inputs, outputs = graph_io(folder / "onnx" / "decoder_model_merged.onnx")
    per_layer = [f"{i}.{part}.{kv}" for i in range(2) for part in ("decoder", "encoder") for kv in ("key", "value")]
    assert list(inputs) == ["input_ids", "input_values", "encoder_hidden_states",
                            *(f"past_key_values.{n}" for n in per_layer), "use_cache_branch"]
    assert outputs == ["logits", *(f"present.{n}" for n in per_layer)]
    assert inputs["input_ids"][0] == onnx.TensorProto.INT64 and inputs["use_cache_branch"] == (onnx.TensorProto.BOOL, [1])
    assert inputs["past_key_values.1.encoder.key"][1] == ["batch_size", 2, "encoder_sequence_length", 16]


def test_transformers_js_transcribes_two_clips_to_the_library_tokens(exported, tmp_path):
    """One batch of two clips of different lengths, fed as the library's zero-padded audio; generate
    starts each row from the folder's decoder_start_token_id."""
    _, tok, folder, audio, expected, unmasked = exported
    assert expected[0] != expected[1], "the clip does not change the library's tokens: the test would prove little"
    assert unmasked != expected, "the padding mask does not change the library's tokens: the test would prove little"
    got = node_generate(tmp_path, "moonshine", folder, audio, [[tok.start_token_id]] * 2, NEW_TOKENS)
    end = tok.end_token_id
    assert [_until_end(row, end) for row in got["tokens"]] == [_until_end(row, end) for row in expected]


def test_a_perturbed_encoder_stem_transcribes_other_tokens(exported, tmp_path):
    """The comparison above can fail: the first convolution's kernel (127 taps) perturbed in the export only."""
    _, tok, folder, audio, expected, _ = exported
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    path = broken / "onnx" / "encoder_model.onnx"
    encoder = onnx.load(str(path))
    kernel = next(t for t in encoder.graph.initializer if 127 in t.dims)
    values = onnx.numpy_helper.to_array(kernel)
    noise = np.random.RandomState(1).normal(0, 1, values.shape).astype(values.dtype)
    kernel.CopyFrom(onnx.numpy_helper.from_array(values + noise, kernel.name))
    onnx.save(encoder, str(path))
    got = node_generate(tmp_path, "moonshine", broken, audio, [[tok.start_token_id]] * 2, NEW_TOKENS)
    end = tok.end_token_id
    assert [_until_end(row, end) for row in got["tokens"]] != [_until_end(row, end) for row in expected]


@pytest.fixture(scope="module")
def genai_folder(exported):
    """The onnxruntime-genai folder of the module's model (genai's ``whisper`` model type), made once per session."""
    audio_to_text, tok, *_ = exported

    def build(root):
        export_speech_to_text(audio_to_text, root / "moonshine", tokenizer=tok, max_length=64)

    return built_once("test_moonshine-genai", build)[0] / "moonshine"


def test_genai_transcribes_two_clips_to_the_library_tokens(exported, genai_folder):
    """The batch of two clips (12000 samples: four rows of 3000, the shorter clip zero-padded) gives genai
    the library's masked tokens, which differ from the unmasked ones, so the padding mask reaches the
    decoder through the cross caches' extra head."""
    require_genai()
    _, tok, _, audio, expected, unmasked = exported
    model = json.loads((genai_folder / "genai_config.json").read_text())["model"]
    assert (model["type"], model["decoder"]["num_attention_heads"], model["decoder"]["num_key_value_heads"]) == (
        "whisper", 3, 2)  # cross caches: 2 heads + the mask's
    inputs, outputs = graph_io(genai_folder / ENCODER_FILE)  # (after onnx's full check)
    assert inputs == {"audio_features": (onnx.TensorProto.FLOAT, ["batch_size", "audio_rows", 3000])}
    assert outputs == ["encoder_hidden_states", *(f"present_{kv}_cross_{i}" for i in range(2) for kv in ("key", "value"))]
    inputs, _ = graph_io(genai_folder / DECODER_FILE)
    assert inputs["past_key_cross_1"][1] == ["batch_size", 3, 1500, 16]
    assert inputs["past_key_self_1"][1] == ["batch_size", 2, "past_sequence_length", 16]
    assert unmasked != expected, "the padding mask does not change the library's tokens: the test would prove little"
    end = tok.end_token_id
    assert transcribe(genai_folder, audio, NEW_TOKENS) == [_until_end(row, end) for row in expected]


def test_a_perturbed_genai_encoder_transcribes_other_tokens(exported, genai_folder, tmp_path):
    """The comparison above can fail: the first convolution's kernel perturbed in the genai export only."""
    require_genai()
    _, tok, _, audio, expected, _ = exported
    broken = tmp_path / "broken"
    shutil.copytree(genai_folder, broken)
    encoder = onnx.load(str(broken / ENCODER_FILE))
    kernel = next(t for t in encoder.graph.initializer if 127 in t.dims)
    values = onnx.numpy_helper.to_array(kernel)
    noise = np.random.RandomState(1).normal(0, 1, values.shape).astype(values.dtype)
    kernel.CopyFrom(onnx.numpy_helper.from_array(values + noise, kernel.name))
    onnx.save(encoder, str(broken / ENCODER_FILE))
    end = tok.end_token_id
    assert transcribe(broken, audio, NEW_TOKENS) != [_until_end(row, end) for row in expected]


def test_bad_inputs_are_refused_with_the_fix(exported, genai_folder, tmp_path):
    audio_to_text, tok, _, audio, *_ = exported
    with pytest.raises(OptionError, match="pad_to_multiple_of=3000"):
        transcribe(genai_folder, audio[:, :8000], NEW_TOKENS)
    with pytest.raises(UnsupportedModelError, match="export_speech_to_text"):
        export_causal_lm(audio_to_text, tmp_path / "causal", max_length=16)
    with pytest.raises(OptionError, match="MoonshineTokenizer"):
        export_speech_to_text(audio_to_text, tmp_path / "no_tokenizer", tokenizer=None, target="web")
    assert not any((tmp_path / name).exists() for name in ("causal", "no_tokenizer"))

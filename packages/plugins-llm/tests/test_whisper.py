"""export_speech_to_text: a tiny random-weight KerasHub WhisperBackbone (2 encoder + 2 decoder layers,
width 64, 3000 frames of 80 mels as genai requires) as an onnxruntime-genai ``whisper`` folder,
transcribing two clips of different lengths in one batch to exactly the library's greedy tokens (the
backbone's forward pass over the growing token list); one export for the module."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from llm_test_helpers import built_once, keras_hub_under_jax, require_genai

keras, keras_hub = keras_hub_under_jax()

import jax  # noqa: E402
from jax2onnx_llm import OptionError, UnsupportedModelError  # noqa: E402
from jax2onnx_llm.multimodal import export_speech_to_text, transcribe  # noqa: E402
from jax2onnx_llm.multimodal.whisper import DECODER_FILE, ENCODER_FILE, SPEECH_FILE  # noqa: E402

NEW_TOKENS = 8


def _tokenizer():
    """A Whisper byte-pair tokenizer over a few letters and two merges, with Whisper's special tokens."""
    vocab = {c: i for i, c in enumerate("abcdefghijklmnopqrstuvwxyz")}
    vocab.update({"Ġ": 26, "Ġa": 27, "th": 28})
    specials = ["<|endoftext|>", "<|startoftranscript|>", "<|notimestamps|>", "<|translate|>", "<|transcribe|>"]
    return keras_hub.tokenizers.WhisperTokenizer(vocabulary=vocab, merges=["Ġ a", "t h"],
                                                 special_tokens={t: 29 + i for i, t in enumerate(specials)})


def _backbone(vocabulary_size: int):
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.WhisperBackbone(vocabulary_size=vocabulary_size, num_layers=2, num_heads=4, hidden_dim=64,
                                                intermediate_dim=128, max_decoder_sequence_length=32)
    for v in backbone.weights:  # small random blocks repeat one token: scale the blocks and the decoder's
        if "kernel" in v.path:  # positions up so transcripts vary
            v.assign(v.numpy() * 3.0)
        if v.path == "decoder_token_and_position_embedding/position_embedding/embeddings":
            v.assign(v.numpy() * 50.0)
    return backbone


def _features():
    """Two clips (1.5 s and 4 s of modulated tones) as the library's audio converter makes them: each
    padded to 30 s, log-mel ``(2, 3000, 80)``."""
    converter = keras_hub.layers.WhisperAudioConverter()

    def clip(seconds: float, hz: float) -> np.ndarray:
        t = np.arange(int(16000 * seconds)) / 16000
        return (0.5 * np.sin(2 * np.pi * hz * t) * np.sin(2 * np.pi * 3 * t)).astype(np.float32)

    return np.concatenate([np.asarray(converter(c[None])) for c in (clip(1.5, 440.0), clip(4.0, 1800.0))])


#: decoder tokens each reference run covers (prompt + generated): one compiled shape for both prompts
LENGTH = 3 + NEW_TOKENS


def _library_greedy(backbone, features: np.ndarray, prompts: list[list[int]]) -> list[list[list[int]]]:
    """KerasHub's greedy tokens after each prompt: the backbone's forward pass (encoder and decoder)
    over the growing token list, the next token the argmax of the last position's tied-embedding
    logits, up to ``LENGTH`` tokens. Tokens after the current one are placeholders the causal decoder
    cannot see, so one compiled shape serves every step."""
    trainable = [v.value for v in backbone.trainable_variables]
    fixed = [v.value for v in backbone.non_trainable_variables]

    @jax.jit
    def logits_at(x, ids, last):
        out = backbone.stateless_call(trainable, fixed, {"encoder_features": x, "decoder_token_ids": ids,
                                                         "decoder_padding_mask": jax.numpy.ones_like(ids)})[0]
        return jax.numpy.take(backbone.token_embedding(out["decoder_sequence_output"], reverse=True), last, axis=1)

    runs = []
    for prompt in prompts:
        ids = np.zeros((features.shape[0], LENGTH), np.int32)
        ids[:, : len(prompt)] = prompt
        for i in range(len(prompt), LENGTH):
            ids[:, i] = np.asarray(logits_at(features, ids, i - 1)).argmax(-1)
        runs.append(ids[:, len(prompt):].tolist())
    return runs


@pytest.fixture(scope="module")
def exported():
    """(backbone, tokenizer, folder, features, the library's greedy tokens per clip after the
    no-timestamp prompt, and after the timestamp prompt)."""
    tokenizer = _tokenizer()
    backbone = _backbone(tokenizer.vocabulary_size())

    def build(root):  # once per session, not per xdist worker
        features = _features()
        prompts = [_prompt(tokenizer, True), _prompt(tokenizer, False)]
        export_speech_to_text(backbone, root / "whisper", tokenizer=tokenizer)
        return features, _library_greedy(backbone, features, prompts)

    root, (features, (expected, timestamped)) = built_once("test_whisper", build)
    return backbone, tokenizer, root / "whisper", features, expected, timestamped


def _prompt(tokenizer, no_timestamps: bool) -> list[int]:
    """Whisper's English transcription prompt: start of transcript, transcribe, [no timestamps]."""
    ids = [tokenizer.bos_token_id, tokenizer.transcribe_token_id]
    return ids + [tokenizer.no_timestamps_token_id] if no_timestamps else ids


def _until_end(tokens: list[int], end: int) -> list[int]:
    return tokens[: tokens.index(end) + 1] if end in tokens else tokens


def test_folder_holds_two_checked_graphs_genai_names(exported):
    _, tokenizer, folder, *_ = exported
    config = json.loads((folder / "genai_config.json").read_text())["model"]
    assert config["type"] == "whisper" and config["eos_token_id"] == tokenizer.eos_token_id
    for section, filename in (("encoder", ENCODER_FILE), ("decoder", DECODER_FILE)):
        assert config[section]["filename"] == filename
        onnx.checker.check_model(str(folder / filename), full_check=True)
        graph = onnx.load(str(folder / filename)).graph
        names = {v.name for v in graph.input} | {v.name for v in graph.output}
        wanted = {v % 1 if "%d" in v else v for part in ("inputs", "outputs") for v in config[section][part].values()}
        assert wanted <= names, (section, wanted - names)
    described = json.loads((folder / SPEECH_FILE).read_text())
    assert described["tokens"]["prompt"] == _prompt(tokenizer, True)
    assert described["tokens"]["prompt_with_timestamps"] == _prompt(tokenizer, False)
    assert (folder / "tokenizer.json").exists()


def test_genai_transcribes_two_clips_to_the_library_tokens(exported):
    """One batch of two clips of different lengths (each padded to 30 s by the library's converter)."""
    require_genai()
    _, tokenizer, folder, features, expected, _ = exported
    assert expected[0] != expected[1], "the clip does not change the library's tokens: the test would prove little"
    assert len(set(expected[0])) > 2, f"the tiny model repeats itself: {expected[0]}"
    want = [_until_end(row, tokenizer.eos_token_id) for row in expected]  # genai stops a row at the end token
    assert transcribe(folder, features, NEW_TOKENS) == want
    assert transcribe(folder, features[1:], NEW_TOKENS) == want[1:]  # alone, the second clip gives the same


def test_the_timestamp_prompt_gives_the_library_tokens(exported):
    """Without <|notimestamps|> (the prompt when timestamps are predicted) genai follows the library too."""
    require_genai()
    _, tokenizer, folder, features, expected, timestamped = exported
    assert timestamped != expected, "the prompt does not change the library's tokens: the test would prove little"
    want = [_until_end(row, tokenizer.eos_token_id) for row in timestamped]
    assert transcribe(folder, features, NEW_TOKENS + 1, prompt=_prompt(tokenizer, False)) == want


def test_a_perturbed_encoder_transcribes_other_tokens(exported, tmp_path):
    """The comparison above can fail: the encoder's first convolution perturbed (in the export only)
    changes genai's tokens away from the library's."""
    require_genai()
    _, tokenizer, folder, features, expected, _ = exported
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    encoder = onnx.load(str(broken / ENCODER_FILE))
    kernel = next(t for t in encoder.graph.initializer if len(t.dims) == 3 and 80 in t.dims)  # conv 1: 80 mels in
    values = onnx.numpy_helper.to_array(kernel)
    noise = np.random.RandomState(1).normal(0, 1, values.shape).astype(values.dtype)
    kernel.CopyFrom(onnx.numpy_helper.from_array(values + noise, kernel.name))
    onnx.save(encoder, str(broken / ENCODER_FILE))
    want = [_until_end(row, tokenizer.eos_token_id) for row in expected]
    assert transcribe(broken, features, NEW_TOKENS) != want


def test_float16_encoder_and_int4_decoder_load_transcribe_and_shrink(exported, tmp_path):
    """precision= per graph: speech.json's report names each graph's precision, size and fused ops,
    both graphs are smaller than float32's, and genai transcribes the batch (the tokens' agreement with
    float32 is measured, not asserted: int4 rounds the decoder's weights)."""
    require_genai()
    backbone, tokenizer, folder, features, *_ = exported
    mixed = export_speech_to_text(backbone, tmp_path / "mixed", tokenizer=tokenizer,
                                  precision={"encoder": "float16", "decoder": "int4"})
    full, report = (json.loads((f / SPEECH_FILE).read_text())["models"] for f in (folder, mixed))
    assert {name: entry["precision"] for name, entry in report.items()} == {"encoder": "float16", "decoder": "int4"}
    for name in ("encoder", "decoder"):
        onnx.checker.check_model(str(mixed / report[name]["file"]), full_check=True)
        assert report[name]["bytes"] < full[name]["bytes"], name
    assert report["decoder"]["fused_ops"].get("com.microsoft.MatMulNBits", 0) > 0
    rows = transcribe(mixed, features, NEW_TOKENS)
    assert len(rows) == 2 and all(0 < len(row) <= NEW_TOKENS for row in rows)
    assert all(0 <= t < tokenizer.vocabulary_size() for row in rows for t in row)


def test_bad_inputs_are_refused_with_the_fix(exported, tmp_path):
    backbone, tokenizer, folder, features, *_ = exported
    with pytest.raises(UnsupportedModelError, match="export_causal_lm"):
        export_speech_to_text(object(), tmp_path / "none", tokenizer=tokenizer)
    with pytest.raises(OptionError, match="WhisperTokenizer"):
        export_speech_to_text(backbone, tmp_path / "no_tokenizer", tokenizer=None)
    with pytest.raises(OptionError, match="max_length <= 32"):
        export_speech_to_text(backbone, tmp_path / "long", tokenizer=tokenizer, max_length=64)
    short = keras_hub.models.WhisperBackbone(vocabulary_size=34, num_layers=1, num_heads=2, hidden_dim=16,
                                             intermediate_dim=32, max_encoder_sequence_length=100,
                                             max_decoder_sequence_length=8)
    with pytest.raises(UnsupportedModelError, match="max_encoder_sequence_length=3000"):
        export_speech_to_text(short, tmp_path / "short", tokenizer=tokenizer)
    with pytest.raises(OptionError, match="text_decoder"):
        export_speech_to_text(backbone, tmp_path / "graph", tokenizer=tokenizer, precision={"text_decoder": "int4"})
    assert not any((tmp_path / name).exists() for name in ("none", "no_tokenizer", "long", "short", "graph"))
    with pytest.raises(OptionError, match=r"\(batch, 3000, 80\)"):
        transcribe(folder, features[:, :100], 4)

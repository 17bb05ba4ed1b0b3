"""export_multimodal_lm: a tiny random-weight KerasHub PaliGemmaCausalLM (2-layer vision tower, 28x28
images in 14x14 patches: 4 image tokens) as an onnxruntime-genai vision folder, generating in genai
exactly KerasHub's greedy tokens for the same preprocessed pixels, and from a PNG file through genai's
image processor; one export for the module."""

from __future__ import annotations

import json
import shutil
import struct
import zlib

import numpy as np
import onnx
import pytest
from llm_test_helpers import built_once, keras_hub_under_jax, require_genai

keras, keras_hub = keras_hub_under_jax()

from jax2onnx_llm import OptionError, UnsupportedModelError  # noqa: E402
from jax2onnx_llm.multimodal import export_multimodal_lm, generate, pixel_values_from_file  # noqa: E402
from jax2onnx_llm.multimodal.export import (  # noqa: E402
    DECODER_FILE,
    EMBEDDING_FILE,
    INPUTS_FILE,
    PROCESSOR_FILE,
    VISION_FILE,
)

VOCAB, NEW_TOKENS, SIZE = 64, 16, 28
PROMPT = [2, 5, 6, 7, 9]


def _model():
    keras.utils.set_random_seed(0)
    M = keras_hub.models
    backbone = M.PaliGemmaBackbone(
        vocabulary_size=VOCAB, image_size=SIZE, num_layers=2, num_query_heads=4, num_key_value_heads=1, hidden_dim=32,
        intermediate_dim=64, head_dim=8, vit_patch_size=14, vit_num_heads=2, vit_hidden_dim=16, vit_num_layers=2,
        vit_intermediate_dim=32)
    model = M.PaliGemmaCausalLM(preprocessor=None, backbone=backbone)
    for v in backbone.weights:  # small random blocks repeat one token: scale them up so sequences vary
        if "kernel" in v.path:
            v.assign(v.numpy() * 3.0)
    model.compile(sampler="greedy")
    return model


def _converter():
    """KerasHub's PaliGemma preprocessing: resize, then x / 127.5 - 1."""
    return keras_hub.layers.PaliGemmaImageConverter(image_size=(SIZE, SIZE), scale=1 / 127.5, offset=-1.0)


def _rgb(seed: int) -> np.ndarray:
    return np.random.RandomState(seed).randint(0, 256, (SIZE, SIZE, 3)).astype(np.uint8)


def _images():
    """Two images' pixel values as the library preprocesses them (``(1, 28, 28, 3)`` each)."""
    converter = _converter()
    return [np.asarray(converter(_rgb(seed).astype(np.float32)))[None] for seed in (0, 1)]


def _write_png(path, rgb: np.ndarray) -> None:
    """An 8-bit RGB PNG of ``rgb`` (no imaging library needed)."""
    height, width, _ = rgb.shape
    rows = b"".join(b"\x00" + rgb[r].tobytes() for r in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def _tokenizer(folder):
    """A tokenizer folder over the tiny vocabulary (genai's image processor loads the folder's tokenizer)."""
    folder.mkdir()
    vocab = {chr(ord("a") + i) if i < 26 else f"<t{i}>": i for i in range(VOCAB)}
    (folder / "tokenizer.json").write_text(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": None, "post_processor": None, "decoder": None,
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": []}}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    return folder


def with_perturbed_vision(folder, broken):
    """A copy of ``folder`` whose vision graph's patch convolution kernel (its largest 4-D initializer)
    has noise added: the export's vision tower only, changed."""
    shutil.copytree(folder, broken)
    vision = onnx.load(str(broken / VISION_FILE))
    kernel = max((t for t in vision.graph.initializer if len(t.dims) == 4), key=lambda t: np.prod(t.dims))
    values = onnx.numpy_helper.to_array(kernel)
    kernel.CopyFrom(onnx.numpy_helper.from_array(values + np.random.RandomState(1).normal(0, 1, values.shape)
                                                 .astype(values.dtype), kernel.name))
    onnx.save(vision, str(broken / VISION_FILE))
    return broken


def library_tokens(model) -> tuple[dict[int, list[int]], int]:
    """KerasHub's greedy tokens after PROMPT for each of the two images ({image index: tokens}), and an
    end token those runs never reach."""
    generate_function = model.make_generate_function()
    expected = {}
    for i, image in enumerate(_images()):
        ids = np.zeros((1, len(PROMPT) + NEW_TOKENS), np.int32)
        mask = np.zeros(ids.shape, bool)
        ids[0, : len(PROMPT)], mask[0, : len(PROMPT)] = PROMPT, True
        out = generate_function({"token_ids": ids, "padding_mask": mask, "images": image}, stop_token_ids=None)
        expected[i] = [int(t) for t in np.asarray(out["token_ids"])[0, len(PROMPT):]]
    seen = {t for tokens in expected.values() for t in tokens}
    return expected, next(t for t in range(1, VOCAB) if t not in seen)


def session_library_tokens(model) -> tuple[dict[int, list[int]], int]:
    """:func:`library_tokens` of ``_model()``, computed once per session (test_web_multimodal's too)."""
    return built_once("paligemma-library-tokens", lambda _: library_tokens(model))[1]


@pytest.fixture(scope="module")
def exported():
    """(model, folder, {image index: KerasHub's greedy tokens} for the two images, whether the export
    left the model it exported as it found it), the folder made once per session."""
    model = _model()
    expected, eos = session_library_tokens(model)

    def build(root):
        export_multimodal_lm(model, root / "paligemma", max_length=32, tokenizer=_tokenizer(root / "tokenizer"),
                             eos_token_id=eos, pad_token_id=0, image_converter=_converter())
        # its mask overrides were for the trace only (checked here: only this process's model was exported)
        return all("_compute_attention_mask" not in vars(layer) for layer in model.backbone.transformer_layers)

    root, left_as_found = built_once("test_multimodal", build)
    return model, root / "paligemma", expected, left_as_found


def test_folder_holds_three_checked_graphs_genai_names(exported):
    _, folder, _, left_as_found = exported
    config = json.loads((folder / "genai_config.json").read_text())["model"]
    assert config["type"] == "gemma3"
    for section, filename in (("vision", VISION_FILE), ("embedding", EMBEDDING_FILE), ("decoder", DECODER_FILE)):
        assert config[section]["filename"] == filename
        onnx.checker.check_model(str(folder / filename), full_check=True)
        graph = onnx.load(str(folder / filename)).graph
        names = {v.name for v in graph.input} | {v.name for v in graph.output}
        wanted = {v for k, v in config[section]["inputs"].items() if "%d" not in v}
        wanted |= {v for v in config[section]["outputs"].values() if "%d" not in v}
        assert wanted <= names, (section, wanted - names)
    inputs = json.loads((folder / INPUTS_FILE).read_text())
    assert (inputs["image_size"], inputs["image_tokens"]) == (SIZE, 4)
    assert left_as_found, "the export left its mask overrides on the model (they are for the trace only)"


def test_genai_generates_the_library_tokens_for_each_image(exported):
    require_genai()
    _, folder, expected, _ = exported
    assert expected[0] != expected[1], "the image does not change KerasHub's tokens: the test would prove little"
    assert len(set(expected[0])) > 4, f"the tiny model repeats itself: {expected[0]}"
    for i, image in enumerate(_images()):
        assert generate(folder, PROMPT, image, NEW_TOKENS) == expected[i], f"image {i}"


def test_the_shared_cache_buffer_generates_the_same_tokens(exported, tmp_path):
    """cache="shared": one max_length buffer for past and present (genai's past_present_share_buffer)."""
    require_genai()
    model, folder, expected, _ = exported
    eos = json.loads((folder / "genai_config.json").read_text())["model"]["eos_token_id"]
    shared = export_multimodal_lm(model, tmp_path / "shared", max_length=32, cache="shared", tokenizer=False,
                                  eos_token_id=eos, pad_token_id=0)
    assert json.loads((shared / "genai_config.json").read_text())["search"]["past_present_share_buffer"] is True
    assert not (shared / PROCESSOR_FILE).exists()  # no image converter given, none carried by the model
    assert generate(shared, PROMPT, _images()[1], NEW_TOKENS) == expected[1]


def test_an_image_file_gives_the_library_pixels_and_tokens(exported, tmp_path):
    """genai's image processor, from the folder's processor_config.json, makes the converter's pixels
    from a PNG of the tower's size, and generation from them gives the library's tokens."""
    require_genai()
    _, folder, expected, _ = exported
    assert (folder / PROCESSOR_FILE).exists()
    _write_png(tmp_path / "image.png", _rgb(0))
    pixels = pixel_values_from_file(folder, tmp_path / "image.png")
    np.testing.assert_allclose(pixels, _images()[0], atol=1e-6)
    assert generate(folder, PROMPT, pixels, NEW_TOKENS) == expected[0]


def test_a_perturbed_vision_tower_generates_other_tokens(exported, tmp_path):
    """The comparison above can fail: the vision graph's patch embedding perturbed (in the export
    only, KerasHub's model untouched) changes genai's tokens away from the library's."""
    require_genai()
    _, folder, expected, _ = exported
    broken = with_perturbed_vision(folder, tmp_path / "broken")
    image = _images()[0]
    assert generate(folder, PROMPT, image, NEW_TOKENS) == expected[0]
    assert generate(broken, PROMPT, image, NEW_TOKENS) != expected[0]


def test_bad_inputs_are_refused_with_the_fix(exported, tmp_path):
    _, folder, _, _ = exported
    text_only = keras_hub.models.GemmaCausalLM(preprocessor=None, backbone=keras_hub.models.GemmaBackbone(
        vocabulary_size=VOCAB, num_layers=1, num_query_heads=2, num_key_value_heads=1, hidden_dim=16,
        intermediate_dim=32, head_dim=8))
    with pytest.raises(UnsupportedModelError, match="export_causal_lm"):
        export_multimodal_lm(text_only, tmp_path / "text", max_length=16)
    assert not (tmp_path / "text").exists()
    from jax2onnx_llm import export_causal_lm

    with pytest.raises(UnsupportedModelError, match="export_multimodal_lm"):
        export_causal_lm(exported[0], tmp_path / "as_text", max_length=16, tokenizer=False, eos_token_id=1)
    assert not (tmp_path / "as_text").exists()
    with pytest.raises(OptionError, match=r"\(1, 28, 28, 3\)"):
        generate(folder, PROMPT, np.zeros((1, 3, SIZE, SIZE), np.float32), 4)
    wrong = keras_hub.layers.PaliGemmaImageConverter(image_size=(56, 56), scale=1 / 127.5, offset=-1.0)
    with pytest.raises(OptionError, match="image_converter resizes to"):
        export_multimodal_lm(exported[0], tmp_path / "wrong", max_length=16, image_converter=wrong, tokenizer=False,
                             eos_token_id=1)
    assert not (tmp_path / "wrong").exists()

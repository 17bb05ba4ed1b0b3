"""export_multimodal_lm on a tiny random-weight KerasHub Gemma3CausalLM with its vision encoder
(2-layer tower, 28x28 images in 7x7 patches pooled 2x2: 4 image tokens) as an onnxruntime-genai
vision folder: genai generates exactly KerasHub's greedy tokens for the same preprocessed pixels,
one prompt and a batch of two; a perturbed vision graph does not; and the folder with a float16
vision tower and embedding and an int4 decoder (precision= per graph) loads, generates and is
smaller. One float32 and one mixed-precision export for the module."""

from __future__ import annotations

import functools
import json

import numpy as np
import onnx
import pytest
from llm_test_helpers import built_once, check_multimodal_graphs, keras_hub_under_jax, require_genai
from test_multimodal import _rgb, _tokenizer, _write_png, with_perturbed_vision

keras, keras_hub = keras_hub_under_jax()

from jax2onnx_llm import OptionError, UnsupportedModelError  # noqa: E402
from jax2onnx_llm.multimodal import export_multimodal_lm, generate, pixel_values_from_file  # noqa: E402
from jax2onnx_llm.multimodal.export import DECODER_FILE, INPUTS_FILE, SUBMODELS  # noqa: E402
from jax2onnx_llm.multimodal.report import folder_report  # noqa: E402

VOCAB, NEW_TOKENS, SIZE = 64, 12, 28
IMAGE, START_IMAGE, END_IMAGE = 60, 61, 62  # the tokenizer's <img>, <start_of_image>, <end_of_image> here
MIXED = {"vision": "float16", "embedding": "float16", "decoder": "int4"}


def _model():
    keras.utils.set_random_seed(0)
    M = keras_hub.models
    encoder = M.Gemma3VisionEncoder(image_size=SIZE, patch_size=7, num_heads=2, hidden_dim=16, num_layers=2,
                                    intermediate_dim=32, output_dim=32, pool_size=2, dtype="float32")
    backbone = M.Gemma3Backbone(vocabulary_size=VOCAB, image_size=SIZE, num_layers=2, num_query_heads=4,
                                num_key_value_heads=1, hidden_dim=32, intermediate_dim=64, head_dim=8,
                                vision_encoder=encoder, dtype="float32")
    model = M.Gemma3CausalLM(preprocessor=None, backbone=backbone)
    for v in backbone.weights:  # small random blocks repeat one token: scale them up so sequences vary
        if "kernel" in v.path:
            v.assign(v.numpy() * 3.0)
    model.compile(sampler="greedy")
    return model


def _prompt(tokens: int) -> list[int]:
    """A prompt as KerasHub's Gemma 3 preprocessor writes one image: text, <start_of_image>, the
    placeholders, <end_of_image>, text."""
    return [2, 5, START_IMAGE, *[IMAGE] * tokens, END_IMAGE, 7, 9]


def _converter():
    """KerasHub's Gemma 3 preprocessing: resize, then x / 127.5 - 1."""
    return keras_hub.layers.Gemma3ImageConverter(image_size=(SIZE, SIZE), scale=1 / 127.5, offset=-1.0)


def _images() -> np.ndarray:
    """Two images' pixels as the library preprocesses them, ``(2, 28, 28, 3)``."""
    converter = _converter()
    return np.stack([np.asarray(converter(_rgb(seed).astype(np.float32))) for seed in (0, 1)])


def _library_tokens(model, prompt: list[int], images: np.ndarray) -> list[list[int]]:
    """KerasHub's greedy tokens for one prompt per image, the two as one batch (its generate function
    on the inputs its preprocessor makes: token ids, padding and vision masks, placeholder indices)."""
    batch = len(images)
    ids = np.zeros((batch, len(prompt) + NEW_TOKENS), np.int32)
    ids[:, : len(prompt)] = prompt
    vision = ids == IMAGE
    out = model.make_generate_function()({
        "token_ids": ids, "padding_mask": np.arange(ids.shape[1])[None].repeat(batch, 0) < len(prompt),
        "images": images[:, None], "vision_mask": vision.astype(np.int32),
        "vision_indices": np.stack([np.nonzero(row)[0] for row in vision]).astype(np.int32)}, stop_token_ids=None)
    return [[int(t) for t in row[len(prompt):]] for row in np.asarray(out["token_ids"])]


tiny_model = functools.cache(_model)  # one per process: test_web_multimodal_gemma3 exports the same model


def prompt_and_library_tokens():
    """(prompt, KerasHub's tokens per image), once per session: KerasHub's generate costs seconds to
    compile, and test_web_multimodal_gemma3 reads the same (an export leaves the model as it was)."""
    def build(_):
        model = tiny_model()
        prompt = _prompt(model.backbone.vision_encoder.num_vision_tokens_per_image)
        return prompt, _library_tokens(model, prompt, _images())

    return built_once("gemma3-library-tokens", build)[1]


@pytest.fixture(scope="module")
def exported():
    """(prompt, float32 folder, mixed-precision folder, KerasHub's tokens per image), made once per session."""
    prompt, expected = prompt_and_library_tokens()

    def build(root):
        seen = {t for row in expected for t in row}
        eos = next(t for t in range(1, VOCAB) if t not in seen)  # an end token the runs never reach
        keywords = dict(max_length=40, eos_token_id=eos, pad_token_id=0, image_token_id=IMAGE)
        # with a tokenizer and the library's image converter: genai's image processor makes pixels from a file
        export_multimodal_lm(tiny_model(), root / "float32", tokenizer=_tokenizer(root / "tokenizer"),
                             image_converter=_converter(), **keywords)
        export_multimodal_lm(tiny_model(), root / "mixed", precision=MIXED, tokenizer=False, **keywords)

    root, _ = built_once("test_multimodal_gemma3", build)
    return prompt, root / "float32", root / "mixed", expected


def test_folder_holds_three_checked_graphs_and_the_decoder_reads_input_ids(exported):
    _, folder, _, _ = exported
    config = json.loads((folder / "genai_config.json").read_text())["model"]
    assert config["type"] == "gemma3"
    assert config["decoder"]["inputs"]["input_ids"] == "input_ids"  # the image spans' two-way attention
    check_multimodal_graphs(folder, config, SUBMODELS)
    inputs = json.loads((folder / INPUTS_FILE).read_text())
    assert (inputs["layout"], inputs["image_token_id"], inputs["image_size"], inputs["image_tokens"]) == (
        "placeholders", IMAGE, SIZE, 4)


def test_genai_generates_the_library_tokens_one_prompt_and_a_batch_of_two(exported):
    require_genai()
    prompt, folder, _, expected = exported
    assert expected[0] != expected[1], "the image does not change KerasHub's tokens: the test would prove little"
    assert len(set(expected[0])) > 4, f"the tiny model repeats itself: {expected[0]}"
    images = _images()
    for i in range(2):
        assert generate(folder, prompt, images[i : i + 1], NEW_TOKENS) == expected[i], f"image {i}"
    assert generate(folder, [prompt, prompt], images, NEW_TOKENS) == expected


def test_an_image_file_gives_the_library_pixels_and_tokens(exported, tmp_path):
    """genai's image processor, from the folder's processor_config.json, makes the converter's pixels
    from a PNG of the tower's size (the prompt stays the library's: placeholders, not genai's)."""
    require_genai()
    prompt, folder, _, expected = exported
    _write_png(tmp_path / "image.png", _rgb(0))
    pixels = pixel_values_from_file(folder, tmp_path / "image.png")
    np.testing.assert_allclose(pixels, _images()[:1], atol=1e-6)
    assert generate(folder, prompt, pixels, NEW_TOKENS) == expected[0]


def test_a_perturbed_vision_tower_generates_other_tokens(exported, tmp_path):
    """The comparison above can fail: the vision graph's patch embedding perturbed (in the export
    only, KerasHub's model untouched) changes genai's tokens away from the library's."""
    require_genai()
    prompt, folder, _, expected = exported
    broken = with_perturbed_vision(folder, tmp_path / "broken")
    assert generate(broken, prompt, _images()[:1], NEW_TOKENS) != expected[0]


def test_float16_towers_and_int4_decoder_load_generate_and_shrink(exported):
    """precision= per graph: the report names each graph's precision, size and fused ops; every graph
    is smaller than its float32 twin; genai runs the folder (its tokens' agreement with float32 is
    measured, not asserted: int4 rounds the weights)."""
    require_genai()
    prompt, folder, mixed, expected = exported
    full, report = folder_report(folder, INPUTS_FILE), folder_report(mixed, INPUTS_FILE)
    assert {name: entry["precision"] for name, entry in report.items()} == MIXED
    for name, filename in SUBMODELS.items():
        onnx.checker.check_model(str(mixed / filename), full_check=True)
        meta = {p.key: p.value for p in onnx.load(str(mixed / filename), load_external_data=False).metadata_props}
        assert meta["jax2onnx.precision"] == MIXED[name]
        assert report[name]["bytes"] < full[name]["bytes"], name
    assert report["decoder"]["fused_ops"].get("com.microsoft.MatMulNBits", 0) > 0
    assert "com.microsoft.MatMulNBits" not in full["decoder"]["fused_ops"]
    tokens = generate(mixed, [prompt, prompt], _images(), NEW_TOKENS)
    assert [len(row) for row in tokens] == [NEW_TOKENS, NEW_TOKENS]
    assert all(0 <= t < VOCAB for row in tokens for t in row)


def test_bad_inputs_are_refused_with_the_fix(exported, tmp_path):
    prompt, folder, _, _ = exported
    model = tiny_model()
    with pytest.raises(OptionError, match="image_token_id="):
        export_multimodal_lm(model, tmp_path / "no_id", max_length=40, tokenizer=False, eos_token_id=1)
    with pytest.raises(OptionError, match="projector"):
        export_multimodal_lm(model, tmp_path / "bad_precision", max_length=40, tokenizer=False, eos_token_id=1,
                             image_token_id=IMAGE, precision={"projector": "int4"})
    assert not (tmp_path / "no_id").exists() and not (tmp_path / "bad_precision").exists()
    from jax2onnx_llm import export_causal_lm

    with pytest.raises(UnsupportedModelError, match="export_multimodal_lm"):
        export_causal_lm(model, tmp_path / "as_text", max_length=16, tokenizer=False, eos_token_id=1)
    with pytest.raises(OptionError, match=r"\(2, 28, 28, 3\)"):  # two prompts' images, one given
        generate(folder, [prompt, prompt], _images()[:1], 4)
    with pytest.raises(OptionError, match="not a multiple"):
        generate(folder, prompt[:-4], _images()[:1], 4)
    with pytest.raises(OptionError, match="drop pixel_position_ids"):  # Gemma 4's patch positions, here unread
        generate(folder, prompt, _images()[:1], 4, pixel_position_ids=np.zeros((1, 16, 2), np.int32))
    assert DECODER_FILE in {entry["file"] for entry in folder_report(folder, INPUTS_FILE).values()}

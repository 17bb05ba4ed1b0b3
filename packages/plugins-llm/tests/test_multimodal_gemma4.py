"""export_multimodal_lm on a tiny random-weight KerasHub Gemma4CausalLM with its vision encoder (one-layer
tower, 4-pixel patches pooled 2x2, at most 4 soft tokens per image; 4 text layers, sliding and global,
the last two KV-shared, per-layer inputs of 8) as an onnxruntime-genai ``gemma4`` folder: genai
generates exactly KerasHub's greedy tokens for the converter's pixels of a 16x24 and a 24x16 image
(resized to 8x16 and 16x8: half their patches, and so half their soft tokens, padding), one prompt
and a batch of two; a perturbed vision graph does not. One float32 export for the module.

genai 0.18 runs the vision graph once per image, so each image is pooled on its own patch grid: the
tokens are KerasHub's for each image in a batch of its own. (KerasHub's batch of these two images
pools both on the wider one's grid, a batch-wide maximum, and gives the 24x16 image other tokens.)"""

from __future__ import annotations

import functools
import json
import shutil

import numpy as np
import onnx
import pytest
from llm_test_helpers import built_once, check_multimodal_graphs, keras_hub_under_jax, require_genai

keras, keras_hub = keras_hub_under_jax()

from jax2onnx_llm import OptionError, UnsupportedModelError  # noqa: E402
from jax2onnx_llm.multimodal import export_multimodal_lm, generate  # noqa: E402
from jax2onnx_llm.multimodal.export import INPUTS_FILE, SUBMODELS, VISION_FILE  # noqa: E402

VOCAB, NEW_TOKENS, LAYERS, PER_LAYER = 64, 12, 4, 8
IMAGE, START_IMAGE, END_IMAGE = 60, 61, 62  # the tokenizer's <|image|>, <|image>, <image|> here
TOKENS = 4  # soft tokens per image (the converter's max_soft_tokens)


def _model():
    keras.utils.set_random_seed(0)
    M = keras_hub.models
    encoder = M.Gemma4VisionEncoder(image_size=16, patch_size=4, num_heads=2, hidden_dim=16, num_layers=1,
                                    intermediate_dim=32, head_dim=8, output_dim=32, pool_size=2, position_embedding_size=16)
    backbone = M.Gemma4Backbone(
        vocabulary_size=VOCAB, image_size=16, num_layers=LAYERS, num_query_heads=4, num_key_value_heads=2, hidden_dim=32,
        intermediate_dim=64, head_dim=8, global_head_dim=16, layer_types=["sliding_attention", "full_attention"] * 2,
        sliding_window_size=4, num_kv_shared_layers=2, hidden_size_per_layer_input=PER_LAYER, vision_encoder=encoder)
    model = M.Gemma4CausalLM(preprocessor=None, backbone=backbone)
    noise = np.random.default_rng(1)
    # random blocks over default-initialized embeddings copy the last token: small embeddings, larger
    # kernels, so the layers (and the image) decide the tokens
    for v in backbone.weights:
        if "kernel" in v.path:
            v.assign(v.numpy() * 3.0)
        elif "embeddings" in v.path:
            v.assign(noise.normal(0, 0.05, v.shape).astype("float32"))
    model.compile(sampler="greedy")
    return model


def _converter():
    """KerasHub's Gemma 4 image converter at test size: 16 patches of 4x4 at most, pixels / 255."""
    return keras_hub.layers.Gemma4ImageConverter(patch_size=4, max_soft_tokens=TOKENS, pooling_kernel_size=2,
                                                 scale=1 / 255.0, offset=0.0)


def _pixels() -> tuple[np.ndarray, np.ndarray]:
    """A 16x24 and a 24x16 image as the converter makes them: pixel_values (2, 16, 48), pixel_position_ids
    (2, 16, 2)."""
    converter, rng = _converter(), np.random.default_rng(0)
    out = [converter(rng.integers(0, 256, (1, *size, 3)).astype(np.float32)) for size in ((16, 24), (24, 16))]
    return (np.concatenate([np.asarray(o["pixel_values"]) for o in out]),
            np.concatenate([np.asarray(o["pixel_position_ids"]) for o in out]).astype(np.int32))


PROMPT = [2, 5, START_IMAGE, *[IMAGE] * TOKENS, END_IMAGE, 7, 9]  # as the preprocessor writes one image


def _library_tokens(model, pixels, positions) -> list[list[int]]:
    """KerasHub's greedy tokens for PROMPT with each of two images, as one batch (its generate function
    on what its preprocessor makes: ids, padding and vision masks, placeholder indices, patches)."""
    ids = np.zeros((2, len(PROMPT) + NEW_TOKENS), np.int32)
    ids[:, : len(PROMPT)] = PROMPT
    vision = ids == IMAGE
    out = model.make_generate_function()({
        "token_ids": ids, "padding_mask": np.arange(ids.shape[1])[None].repeat(2, 0) < len(PROMPT),
        "pixel_values": pixels[:, None], "pixel_position_ids": positions[:, None], "vision_mask": vision.astype(np.int32),
        "vision_indices": np.stack([np.nonzero(row)[0] for row in vision]).astype(np.int32)}, stop_token_ids=None)
    return [[int(t) for t in row[len(PROMPT):]] for row in np.asarray(out["token_ids"])]


tiny_model = functools.cache(_model)  # one per process: test_web_multimodal_gemma4 exports the same model


def pixels_and_library_tokens():
    """(pixels, positions, KerasHub's tokens per image, an eos id they never reach), once per session
    (test_web_multimodal_gemma4 compares with the same tokens)."""
    def build(_):
        model = tiny_model()
        pixels, positions = _pixels()
        # each image in a batch of its own (genai runs the vision graph image by image, see the module doc)
        expected = [_library_tokens(model, pixels[[i, i]], positions[[i, i]])[0] for i in range(2)]
        eos = next(t for t in range(1, VOCAB) if t not in {t for row in expected for t in row})  # never reached
        return pixels, positions, expected, eos

    return built_once("gemma4-library-tokens", build)[1]


@pytest.fixture(scope="module")
def exported():
    """(folder, pixels, positions, KerasHub's tokens per image), built once per session."""
    def build(root):
        pixels, positions, expected, eos = pixels_and_library_tokens()
        export_multimodal_lm(tiny_model(), root / "float32", max_length=40, tokenizer=False, eos_token_id=eos,
                             pad_token_id=0, image_token_id=IMAGE, image_converter=_converter())
        return pixels, positions, expected

    root, (pixels, positions, expected) = built_once("test_multimodal_gemma4", build)
    return root / "float32", pixels, positions, expected


def test_folder_is_genai_gemma4_with_per_layer_inputs_and_checked_graphs(exported):
    folder, pixels, positions, _ = exported
    config = json.loads((folder / "genai_config.json").read_text())["model"]
    assert config["type"] == "gemma4"
    assert config["embedding"]["outputs"]["per_layer_inputs"] == config["decoder"]["inputs"]["per_layer_inputs"]
    assert set(config["vision"]["inputs"]) == {"pixel_values", "pixel_position_ids"}
    assert config["decoder"]["num_hidden_layers"] == 2  # the two KV-shared layers hold no cache
    check_multimodal_graphs(folder, config, SUBMODELS)
    embedding = onnx.load(str(folder / "embedding.onnx")).graph
    width = next(o for o in embedding.output if o.name == "per_layer_inputs").type.tensor_type.shape.dim[-1].dim_value
    assert width == LAYERS * PER_LAYER
    inputs = json.loads((folder / INPUTS_FILE).read_text())
    assert (inputs["image_tokens"], inputs["patches"], inputs["patch_pixels"]) == (TOKENS, *pixels.shape[1:])
    assert (positions == -1).all(axis=-1).sum(axis=1).tolist() == [8, 8], "the images should hold padding patches"


def test_genai_generates_the_library_tokens_one_prompt_and_a_batch_of_two(exported):
    require_genai()
    folder, pixels, positions, expected = exported
    assert expected[0] != expected[1], "the image does not change KerasHub's tokens: the test would prove little"
    assert len(set(expected[0])) > 4, f"the tiny model repeats itself: {expected[0]}"
    for i in range(2):
        assert generate(folder, PROMPT, pixels[i: i + 1], NEW_TOKENS, pixel_position_ids=positions[i: i + 1]) == expected[i]
    assert generate(folder, [PROMPT, PROMPT], pixels, NEW_TOKENS, pixel_position_ids=positions) == expected


def test_a_perturbed_vision_tower_generates_other_tokens(exported, tmp_path):
    """The comparison above can fail: the vision graph's patch projection perturbed (in the export only)
    changes genai's tokens away from the library's."""
    require_genai()
    folder, pixels, positions, expected = exported
    broken = tmp_path / "broken"
    shutil.copytree(folder, broken)
    vision = onnx.load(str(broken / VISION_FILE))
    kernel = next(t for t in vision.graph.initializer if tuple(t.dims) == (pixels.shape[-1], 16))  # pixels -> tower width
    values = onnx.numpy_helper.to_array(kernel)
    kernel.CopyFrom(onnx.numpy_helper.from_array(
        values + np.random.RandomState(1).normal(0, 1, values.shape).astype(values.dtype), kernel.name))
    onnx.save(vision, str(broken / VISION_FILE))
    assert generate(broken, PROMPT, pixels[:1], NEW_TOKENS, pixel_position_ids=positions[:1]) != expected[0]


def test_bad_inputs_are_refused_with_the_fix(exported, tmp_path):
    folder, pixels, positions, _ = exported
    model = tiny_model()
    with pytest.raises(OptionError, match="pixel_position_ids"):
        generate(folder, PROMPT, pixels[:1], 4)
    with pytest.raises(OptionError, match=r"\(2, 16, 48\)"):  # two prompts' images, one given
        generate(folder, [PROMPT, PROMPT], pixels[:1], 4, pixel_position_ids=positions[:1])
    from jax2onnx_llm import export_causal_lm

    with pytest.raises(UnsupportedModelError, match="export_multimodal_lm"):
        export_causal_lm(model, tmp_path / "as_text", max_length=16, tokenizer=False, eos_token_id=1)
    with pytest.raises(OptionError, match="pixel patches"):  # a converter cutting other patches than the tower's
        export_multimodal_lm(model, tmp_path / "converter", max_length=16, tokenizer=False, eos_token_id=1,
                             image_token_id=IMAGE, image_converter=keras_hub.layers.Gemma4ImageConverter(
                                 patch_size=2, max_soft_tokens=TOKENS, pooling_kernel_size=2))
    assert not any((tmp_path / name).exists() for name in ("as_text", "converter"))

"""``export_multimodal_lm(..., target="web")`` on test_multimodal_gemma4's tiny KerasHub Gemma4CausalLM
with its vision encoder (per-layer inputs, KV-shared layers, padded patches): the folder transformers.js
4's ``Gemma4ForConditionalGeneration`` loads. In one Node process each of the two images (one prompt
each, the converter's pixels and patch positions) generates exactly KerasHub's greedy tokens; a
perturbed vision tower (in the export only) generates others. One float32 export."""

from __future__ import annotations

import json
import shutil

import numpy as np
import onnx
import pytest
from llm_test_helpers import built_once, keras_hub_under_jax
from test_web_multimodal import node_request, node_runs

keras, keras_hub = keras_hub_under_jax()

from jax2onnx_llm.multimodal import export_multimodal_lm  # noqa: E402
from test_multimodal_gemma4 import (  # noqa: E402
    IMAGE,
    LAYERS,
    NEW_TOKENS,
    PER_LAYER,
    PROMPT,
    _converter,
    pixels_and_library_tokens,
    tiny_model,
)

SESSIONS = ("audio_encoder", "decoder_model_merged", "embed_tokens", "vision_encoder")


def _request(root, folder, pixels, positions, i):
    request = node_request(root, "gemma4", folder, pixels[i: i + 1], [PROMPT], NEW_TOKENS)
    return {**request, "positions": {"dims": [1, *positions.shape[1:]], "data": positions[i].ravel().tolist()}}


@pytest.fixture(scope="module")
def runs():
    """(folder, pixels, positions, KerasHub's tokens per image, transformers.js' results: each image
    with the export, the first with a perturbed vision tower), made once per session."""
    pixels, positions, expected, eos = pixels_and_library_tokens()

    def build(root):
        folder = export_multimodal_lm(tiny_model(), root / "gemma4", max_length=40, target="web", tokenizer=False,
                                      eos_token_id=eos, pad_token_id=0, image_token_id=IMAGE,
                                      image_converter=_converter())
        broken = root / "broken"
        shutil.copytree(folder, broken)
        path = broken / "onnx" / "vision_encoder.onnx"
        vision = onnx.load(str(path))
        kernel = next(t for t in vision.graph.initializer if tuple(t.dims) == (pixels.shape[-1], 16))  # pixels -> tower
        values = onnx.numpy_helper.to_array(kernel)
        kernel.CopyFrom(onnx.numpy_helper.from_array(
            values + np.random.RandomState(1).normal(0, 1, values.shape).astype(values.dtype), kernel.name))
        onnx.save(vision, str(path))
        return node_runs(root, [_request(root, folder, pixels, positions, 0),
                                _request(root, folder, pixels, positions, 1), _request(root, broken, pixels, positions, 0)])

    root, results = built_once("test_web_multimodal_gemma4", build)
    return root / "gemma4", pixels, positions, expected, results


def test_folder_is_transformers_js_gemma4_layout(runs):
    folder, *_ = runs
    assert sorted(p.stem for p in (folder / "onnx").iterdir()) == list(SESSIONS)
    for session in SESSIONS:
        onnx.checker.check_model(str(folder / "onnx" / f"{session}.onnx"), full_check=True)
    config = json.loads((folder / "config.json").read_text())
    assert (config["model_type"], config["image_token_id"]) == ("gemma4", IMAGE)
    text = config["text_config"]
    assert (text["num_hidden_layers"], text["num_kv_shared_layers"]) == (LAYERS, 2)
    decoder = onnx.load(str(folder / "onnx" / "decoder_model_merged.onnx")).graph
    names = [i.name for i in decoder.input]
    assert names[:3] == ["inputs_embeds", "per_layer_inputs", "attention_mask"]
    assert len([n for n in names if n.startswith("past_key_values.")]) == 4  # the two KV-holding layers
    vision = {i.name: i.type.tensor_type.elem_type for i in onnx.load(str(folder / "onnx" / "vision_encoder.onnx"))
              .graph.input}
    assert vision == {"pixel_values": onnx.TensorProto.FLOAT, "pixel_position_ids": onnx.TensorProto.INT64}


def test_each_image_generates_the_library_tokens_in_transformers_js(runs):
    _, _, _, expected, (first, second, _) = runs
    assert expected[0] != expected[1], "the image does not change KerasHub's tokens: the test would prove little"
    assert [first["tokens"][0], second["tokens"][0]] == expected


def test_a_perturbed_vision_tower_generates_other_tokens(runs):
    """The comparison above can fail: the vision graph's patch projection perturbed in the export only."""
    _, _, _, expected, (*_, broken) = runs
    assert broken["tokens"][0] != expected[0]


def test_the_audio_session_returns_no_features_and_per_layer_inputs_leave_the_placeholders(runs):
    """The model has no audio tower: the session transformers.js always loads returns zero rows. The
    token part of the per-layer inputs takes the placeholders as id 0, as KerasHub does."""
    import onnxruntime as ort

    folder, *_ = runs
    audio = ort.InferenceSession(str(folder / "onnx" / "audio_encoder.onnx"), providers=["CPUExecutionProvider"])
    assert audio.run(None, {"input_features": np.zeros((1, 5, 3), np.float32)})[0].shape == (0, 32)
    embed = ort.InferenceSession(str(folder / "onnx" / "embed_tokens.onnx"), providers=["CPUExecutionProvider"])
    _, per_layer = embed.run(None, {"input_ids": np.asarray([[IMAGE, 0, 5]], np.int64)})
    assert per_layer.shape == (1, 3, LAYERS * PER_LAYER)
    np.testing.assert_array_equal(per_layer[0, 0], per_layer[0, 1])
    assert not np.array_equal(per_layer[0, 1], per_layer[0, 2])

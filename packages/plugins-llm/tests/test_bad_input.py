"""Bad input: one clear error naming the problem and the fix, and nothing half-written in out_dir."""

from __future__ import annotations

import dataclasses
import json
import os

import pytest
from jax2onnx.errors import Jax2OnnxError
from jax2onnx_llm import (
    CacheLayoutError,
    MaxLengthError,
    OptionError,
    TokenizerError,
    UnsupportedModelError,
    export_causal_lm,
)
from test_spec import tiny_jax_decoder


def _one_line(exc: pytest.ExceptionInfo) -> str:
    text = str(exc.value)
    assert "\n" not in text and isinstance(exc.value, Jax2OnnxError)
    return text


def test_unsupported_family(tmp_path):
    class NotAModel:
        pass

    with pytest.raises(UnsupportedModelError) as exc:
        export_causal_lm(NotAModel(), tmp_path / "m", max_length=32)
    # every registered front-end is named with what it takes
    for fragment in ("NotAModel", "DecoderSpec", "hf_flax: a Hugging Face", "keras_hub: a KerasHub CausalLM",
                     "step_function: a jax2onnx_llm.DecoderSpec"):
        assert fragment in _one_line(exc), fragment
    assert not (tmp_path / "m").exists()


def test_unsupported_transformers_class(tmp_path):
    tf = pytest.importorskip("transformers", reason="transformers provides the model")
    # a Flax causal LM class the pack has no adapter for (an encoder used as a decoder)
    model = tf.FlaxRobertaForCausalLM(tf.RobertaConfig(num_hidden_layers=1, hidden_size=32, num_attention_heads=4,
                                                       intermediate_size=64, vocab_size=64, is_decoder=True))
    with pytest.raises(UnsupportedModelError) as exc:
        export_causal_lm(model, tmp_path / "m", max_length=32)
    assert "FlaxRobertaForCausalLM" in _one_line(exc) and "FlaxGPTNeoForCausalLM" in str(exc.value)
    assert not (tmp_path / "m").exists()


def test_unsupported_keras_hub_class(tmp_path):
    # a KerasHub model that is no CausalLM: no front-end claims it, and the error says what the KerasHub one takes
    from llm_test_helpers import keras_hub_under_jax

    keras, keras_hub = keras_hub_under_jax()
    backbone = keras_hub.models.BertBackbone(vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=8,
                                             intermediate_dim=16, max_sequence_length=16)
    masked_lm = keras_hub.models.BertMaskedLM(backbone=backbone, preprocessor=None)
    with pytest.raises(UnsupportedModelError) as exc:
        export_causal_lm(masked_lm, tmp_path / "m", max_length=32)
    assert "BertMaskedLM" in _one_line(exc) and "keras_hub: a KerasHub CausalLM" in str(exc.value)
    assert not (tmp_path / "m").exists()


def test_cache_layout_the_model_cannot_use(tmp_path):
    spec = dataclasses.replace(tiny_jax_decoder(), cache_layouts=("concat",))
    with pytest.raises(CacheLayoutError) as exc:
        export_causal_lm(spec, tmp_path / "m", max_length=32, cache="shared")
    assert "cache='concat'" in _one_line(exc)
    with pytest.raises(OptionError) as exc:
        export_causal_lm(spec, tmp_path / "m", max_length=32, cache="paged")
    assert "'concat'" in _one_line(exc) and "'shared'" in str(exc.value)


def test_max_length_beyond_positions(tmp_path):
    with pytest.raises(MaxLengthError) as exc:
        export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=4096)
    assert "max_length <= 128" in _one_line(exc)
    with pytest.raises(MaxLengthError):
        export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=0)


def test_missing_tokenizer_file(tmp_path):
    (tmp_path / "tok").mkdir()
    (tmp_path / "tok" / "vocab.txt").write_text("a\n")
    with pytest.raises(TokenizerError) as exc:
        export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=32, tokenizer=tmp_path / "tok")
    assert "tokenizer.json" in _one_line(exc) and "save_pretrained" in str(exc.value)
    assert not (tmp_path / "m").exists()


def test_precision_core_cannot_export(tmp_path):
    # Checked by core's ExportOptions.check, as for to_onnx: named before tracing, nothing left behind.
    with pytest.raises(Jax2OnnxError) as exc:
        export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=32, precision="float7")
    assert "float7" in str(exc.value) and not (tmp_path / "m").exists()
    assert sorted(os.listdir(tmp_path)) == []  # no staging folder left either


def test_failed_export_leaves_the_earlier_folder_untouched(tmp_path):
    good = export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=32, cache="concat", target="onnx")
    before = {p.name: p.read_bytes() for p in good.iterdir()}
    spec = tiny_jax_decoder()

    def broken(*args):
        raise RuntimeError("boom in the step")

    with pytest.raises(Jax2OnnxError, match="boom in the step"):
        export_causal_lm(dataclasses.replace(spec, step=broken), tmp_path / "m", max_length=32, target="onnx")
    assert {p.name: p.read_bytes() for p in good.iterdir()} == before
    assert sorted(os.listdir(tmp_path)) == ["m"]  # no temp folder left beside it
    assert json.loads((good / "genai_config.json").read_text())["model"]["context_length"] == 32


def test_out_dir_with_foreign_files_is_not_replaced(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "notes.txt").write_text("mine")
    with pytest.raises(OptionError) as exc:
        export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=32)
    assert "genai_config.json" in _one_line(exc)
    assert (tmp_path / "m" / "notes.txt").read_text() == "mine"



@pytest.mark.parametrize(("search", "fragment"), [
    ({"no_such_option": 1}, "search options ['no_such_option'] are not genai_config.json search fields"),
    ({"do_sample": "yes"}, "do_sample='yes': give True or False"),
    ({"top_k": 2.5}, "top_k=2.5: give an int"),
    ({"top_k": True}, "top_k=True: give an int"),
    ({"temperature": "hot"}, "temperature='hot': give a number"),
    ({"max_length": 64}, "max_length=64: the generation length is at most the export's max_length (32)"),
    ({"past_present_share_buffer": True}, "follows the graph's cache layout; pass cache="),
    ([("do_sample", True)], "give a dict of genai_config.json search options"),
])
def test_bad_search_options_are_refused_before_the_export(tmp_path, search, fragment):
    """Said before minutes of tracing and writing (genai_config.json is written last), not by
    onnxruntime-genai when it loads the folder."""
    with pytest.raises(OptionError) as exc:
        export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=32, search=search)
    assert fragment in _one_line(exc)
    assert sorted(os.listdir(tmp_path)) == []

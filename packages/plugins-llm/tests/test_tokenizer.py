"""Tokenizer files beside the model: onnxruntime-genai's Tokenizer reads them from the folder."""

from __future__ import annotations

import numpy as np
import pytest
from jax2onnx_llm import export_causal_lm
from llm_test_helpers import require_genai
from test_spec import VOCAB, tiny_jax_decoder


def tiny_tokenizer():
    """A byte-level BPE fast tokenizer over lowercase letters and a few merges, within VOCAB ids
    (built here: nothing is downloaded)."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers builds the test tokenizer")
    tf = pytest.importorskip("transformers", reason="transformers wraps it as a fast tokenizer")
    symbols = ["<pad>", "<s>", "</s>", "\u0120", *"abcdefghijklmnopqrstuvwxyz"]
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("\u0120", "w"), ("o", "r"), ("\u0120w", "or")]
    vocab = {t: i for i, t in enumerate(symbols + ["".join(m) for m in merges])}
    assert len(vocab) <= VOCAB
    tok = tokenizers.Tokenizer(tokenizers.models.BPE(vocab, merges))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")


@pytest.mark.parametrize("as_folder", [False, True])
def test_tokenizer_is_written_and_runs_in_genai(tmp_path, as_folder):
    og = require_genai()
    tokenizer = tiny_tokenizer()
    if as_folder:
        tokenizer.save_pretrained(str(tmp_path / "tok"))
        tokenizer = tmp_path / "tok"
    folder = export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=32, tokenizer=tokenizer, target="onnx")
    assert (folder / "tokenizer.json").is_file()
    genai_tok = og.Tokenizer(og.Model(str(folder)))
    text = "hello world"
    ids = [int(i) for i in genai_tok.encode(text)]
    assert ids == tiny_tokenizer()(text)["input_ids"]  # the same ids as the library's tokenizer
    assert genai_tok.decode(ids) == text


def keras_hub_gpt2_with_preprocessor():
    """A KerasHub GPT2CausalLM whose preprocessor carries a GPT2Tokenizer built from a small local
    vocabulary and merges (byte-level BPE; nothing downloaded)."""
    import os

    os.environ.setdefault("KERAS_BACKEND", "jax")
    keras = pytest.importorskip("keras", reason="KerasHub models need keras")
    keras_hub = pytest.importorskip("keras_hub", reason="keras-hub provides the model and tokenizer")
    if keras.backend.backend() != "jax":  # pragma: no cover
        pytest.skip("KerasHub models export under the JAX backend only (KERAS_BACKEND=jax)")
    symbols = ["<|endoftext|>", "\u0120", ",", "!", *"abcdefghijklmnopqrstuvwxyz"]
    merges = ["h e", "l l", "he ll", "hell o", "\u0120 w", "o r", "\u0120w or", "l d", "\u0120wor ld", "\u0120 h"]
    vocab = {t: i for i, t in enumerate(symbols + [m.replace(" ", "") for m in merges])}
    tokenizer = keras_hub.models.GPT2Tokenizer(vocabulary=vocab, merges=merges)
    preprocessor = keras_hub.models.GPT2CausalLMPreprocessor(tokenizer, sequence_length=16)
    keras.utils.set_random_seed(0)
    backbone = keras_hub.models.GPT2Backbone(vocabulary_size=64, num_layers=1, num_heads=2, hidden_dim=16,
                                             intermediate_dim=32, max_sequence_length=64)
    return keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=preprocessor), tokenizer


def test_keras_hub_tokenizer_is_written_and_encodes_alike_in_genai(tmp_path):
    og = require_genai()
    model, keras_tok = keras_hub_gpt2_with_preprocessor()
    folder = export_causal_lm(model, tmp_path / "m", max_length=32)  # the preprocessor's tokenizer, converted
    assert (folder / "tokenizer.json").is_file()
    genai_tok = og.Tokenizer(og.Model(str(folder)))
    for text in ("hello world", "hello, hello world!", "a quick fox"):
        want = [int(i) for i in np.asarray(keras_tok(text))]
        got = [int(i) for i in genai_tok.encode(text)]
        assert got == want, f"{text!r}: genai {got} vs KerasHub {want}"
        assert genai_tok.decode(got) == str(keras_tok.detokenize(np.asarray(want, np.int32))) == text
    assert len(set(want)) > 5  # the test text really goes through merges and single letters


def test_tokenizer_false_writes_none(tmp_path):
    model, _ = keras_hub_gpt2_with_preprocessor()
    folder = export_causal_lm(model, tmp_path / "m", max_length=32, tokenizer=False)
    assert not (folder / "tokenizer.json").exists()


def test_keras_hub_tokenizer_without_an_exporter_is_one_clear_error(tmp_path):
    from jax2onnx_llm import TokenizerError

    keras_hub = pytest.importorskip("keras_hub", reason="keras-hub provides the tokenizer")
    tok = keras_hub.tokenizers.ByteTokenizer()  # no Hugging Face export for it
    with pytest.raises(TokenizerError) as exc:
        export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=32, tokenizer=tok)
    message = str(exc.value)
    assert "\n" not in message and "ByteTokenizer" in message and "tokenizer=False" in message
    assert not (tmp_path / "m").exists()

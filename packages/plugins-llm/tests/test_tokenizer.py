"""Tokenizer files beside the model: onnxruntime-genai's Tokenizer reads them from the folder."""

from __future__ import annotations

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

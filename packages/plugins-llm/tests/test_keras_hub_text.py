"""Text in, tokens out, as KerasHub users run it: a CausalLM with its preprocessor (its tokenizer
trained here), exported with the tokenizer it carries. Prompts are built as the preprocessor builds
them (the start token, then onnxruntime-genai's ``Tokenizer.encode`` of the text) and generated one
by one and as a left-padded batch; the tokens must be KerasHub's own greedy tokens.

The start tokens here share their id with KerasHub's pad id (KerasHub's tokenizers fix the pad id at
0; GPT-NeoX's start, end and pad are one token): the folder must not pad with the start token, or
the graph takes every prompt's leading start token for padding (issue #32, outcome 5)."""

from __future__ import annotations

import numpy as np
import pytest
from jax2onnx_llm import export_causal_lm
from jax2onnx_llm.genai_run import folder_pad_token_id, greedy, until_eos
from llm_test_helpers import keras_hub_under_jax, require_genai
from test_tokenizer_strings import keras_tokenizer

keras, keras_hub = keras_hub_under_jax()

M = keras_hub.models
TEXTS = ["the quick brown fox", "Grüße aus Köln 😀", "hello  world 2026, don't"]
NEW = 12
SIZES = dict(num_layers=2, hidden_dim=32, intermediate_dim=64)
FAMILIES = {  # tokenizer kind -> (CausalLM, its backbone's head arguments)
    "llama": (M.LlamaCausalLM, dict(num_query_heads=4, num_key_value_heads=2)),
    "llama3": (M.Llama3CausalLM, dict(num_query_heads=4, num_key_value_heads=2)),
    "gpt_neox": (M.GPTNeoXCausalLM, dict(num_heads=4)),
}


def keras_model(kind: str, tmp_path):
    tokenizer = keras_tokenizer(kind, tmp_path)
    causal_lm, heads = FAMILIES[kind]
    keras.utils.set_random_seed(0)
    backbone = causal_lm.backbone_cls(vocabulary_size=tokenizer.vocabulary_size(), **SIZES, **heads)
    preprocessor = causal_lm.preprocessor_cls(tokenizer, sequence_length=48)
    model = causal_lm(backbone=backbone, preprocessor=preprocessor)
    for v in backbone.weights:  # larger weights, so that greedy sequences vary
        if "kernel" in v.path:
            v.assign(v.numpy() * 4.0)
    model.compile(sampler="greedy")
    return model, tokenizer


def keras_tokens(model, texts):
    """KerasHub's greedy tokens after each text, from its preprocessor's prompts."""
    x = model.preprocessor.generate_preprocess(texts, sequence_length=48)
    ids, mask = np.asarray(x["token_ids"]), np.asarray(x["padding_mask"])
    lengths = mask.sum(axis=1)
    model.make_generate_function()
    out = np.asarray(model.generate_function({"token_ids": ids, "padding_mask": mask}, stop_token_ids=None)["token_ids"])
    prompts = [[int(t) for t in ids[row, :n]] for row, n in enumerate(lengths)]
    return prompts, [[int(t) for t in out[row, n:n + NEW]] for row, n in enumerate(lengths)]


@pytest.mark.parametrize("kind", list(FAMILIES))
def test_text_prompts_generate_keras_hubs_tokens(tmp_path, kind):
    og = require_genai()
    model, tokenizer = keras_model(kind, tmp_path)
    assert model.preprocessor.add_start_token and tokenizer.pad_token_id == 0
    assert (tokenizer.start_token_id == 0) == (kind != "llama")  # Llama 2's start token is 1: the control
    keras_prompts, want = keras_tokens(model, TEXTS)
    want = [until_eos(row, tokenizer.end_token_id) for row in want]  # genai stops at the end token
    folder = export_causal_lm(model, tmp_path / "m", max_length=48)  # the preprocessor's tokenizer is written
    assert folder_pad_token_id(folder) != tokenizer.start_token_id
    genai_tokenizer = og.Tokenizer(og.Model(str(folder)))
    prompts = [[tokenizer.start_token_id, *(int(t) for t in genai_tokenizer.encode(text))] for text in TEXTS]
    assert prompts == keras_prompts
    assert len({t for row in want for t in row}) > 4 and sum(map(len, want)) > 2 * NEW, want  # varied, not ended at once
    eos = tokenizer.end_token_id
    alone = [until_eos(greedy(folder, [p], NEW)[0], eos) for p in prompts]
    assert alone == want
    # left-padded with the folder's pad id (a row that ended is filled with the end token, then pads)
    assert [until_eos(row, eos) for row in greedy(folder, prompts, NEW)] == want


def test_a_given_pad_id_is_kept_even_if_it_is_the_start_token(tmp_path):
    """``pad_token_id=`` is the user's choice, kept as given (the guide says what it costs)."""
    model, tokenizer = keras_model("llama3", tmp_path)
    folder = export_causal_lm(model, tmp_path / "m", max_length=48, pad_token_id=tokenizer.start_token_id,
                              tokenizer=False)
    assert folder_pad_token_id(folder) == tokenizer.start_token_id

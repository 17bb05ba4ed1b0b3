"""Padding never changes a token (issue #32, outcome 5): for every family and every way the pad id is
given or missing — the model's config (a KerasHub model: its preprocessor's tokenizer), the tokenizer
written into the folder, the ``pad_token_id=`` argument, none at all — ``genai_config.json`` names the
pad id the graph detects padding by, and a left-padded batch of three prompts (padded, as genai's
users pad, with that id) generates for each prompt exactly what it generates alone, and the library's
own greedy tokens.

onnxruntime-genai 0.18 sends an all-ones ``attention_mask`` for a padded batch, so the pad id is all
the graph has. Each pad id below also occurs inside a prompt (not at its start), which must not be
read as padding. Per family the model and the library's tokens are built once; each pad source is
one export (about a second for these tiny models).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import pathlib
import tempfile

import numpy as np
import pytest
from jax2onnx_llm import OptionError, export_causal_lm, special_tokens
from jax2onnx_llm.genai_run import greedy, left_pad, until_eos
from llm_test_helpers import NEW_TOKENS, PROMPTS, check_folder, require_genai

# the pad ids each source names; each occurs inside a prompt: 7 in the first, 13 in the second, 22 in the third
CONFIG_PAD, TOKENIZER_PAD, ARGUMENT_PAD = 7, 13, 22
SOURCES = ["config", "tokenizer", "argument", "none"]
FAMILIES = ["hf-gpt2", "hf-llama", "hf-mistral", "hf-gemma", "hf-gptneo", "hf-gptj", "hf-opt", "hf-bloom", "hf-xglm",
            "keras-gpt2", "keras-gemma", "keras-llama", "nnx-llama"]


def fast_tokenizer(vocab_size: int, eos: int):
    """A word-level Hugging Face fast tokenizer over ``vocab_size`` ids whose pad token is
    TOKENIZER_PAD and end token ``eos`` (built here; nothing downloaded)."""
    tokenizers = pytest.importorskip("tokenizers", reason="tokenizers builds the test tokenizer")
    tf = pytest.importorskip("transformers", reason="transformers wraps it as a fast tokenizer")
    names = [f"w{i}" for i in range(vocab_size)]
    names[TOKENIZER_PAD], names[eos] = "<pad>", "</s>"
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel({n: i for i, n in enumerate(names)}, unk_token="w0"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>")


@dataclasses.dataclass
class Family:
    model: object  # names no pad token
    eos: int  # its end token (one it does not generate after PROMPTS)
    expected: np.ndarray  # the library's greedy tokens after PROMPTS, a left-padded batch
    with_config_pad: object  # the same weights, the model naming a pad token itself
    config_pad: int = CONFIG_PAD
    needs_eos: bool = False  # a KerasHub model without a preprocessor names no end token


@functools.cache
def family(name: str) -> Family:
    library, kind = name.split("-")
    if library == "hf":
        import test_hf_flax_more as more
        import test_transformers_flax as hf

        make = more.make if kind in more.MODELS else hf.make
        model = make(kind, pad_token_id=None)  # as GPT-2 and Llama checkpoints ship
        # the same module and weights, its config (a read-only property over _config) naming a pad token
        named = copy.copy(model)
        named._config, named.generation_config = copy.deepcopy(model.config), copy.deepcopy(model.generation_config)
        named.config.pad_token_id = named.generation_config.pad_token_id = CONFIG_PAD
        return Family(model, hf.EOS, np.asarray(hf.hf_reference(model)(PROMPTS)), named)
    if library == "keras":
        import test_keras_hub as kh

        model = kh.make(kind)
        expected = np.asarray(kh.keras_reference(model)(PROMPTS))
        alone = np.concatenate([np.asarray(kh.keras_reference(model)([p])).ravel() for p in PROMPTS])
        taken = set(expected.ravel()) | set(alone) | {CONFIG_PAD, TOKENIZER_PAD, ARGUMENT_PAD}
        eos = next(t for t in range(3, 128) if t not in taken)  # an end token these prompts never reach (3+: below
        # are the GPT2 tokenizer's merge symbols, 0 its pad id)
        # the same backbone with a preprocessor whose tokenizer names the tokens: pad 0 (KerasHub's), end `eos`
        if kind == "gpt2":
            names = ["a", "b", "ab", *(f"w{i}" for i in range(3, 128))]  # one merge: KerasHub wants at least one
            names[eos] = "<|endoftext|>"
            tokenizer = kh.keras_hub.models.GPT2Tokenizer(vocabulary={n: i for i, n in enumerate(names)}, merges=["a b"])
        else:  # a SentencePiece model trained in the test (its special pieces below 128, the end at `eos`)
            from test_tokenizer_strings import sentencepiece_model

            ids = dict(pad_id=0, unk_id=1, bos_id=2, eos_id=eos) if kind == "gemma" else dict(unk_id=0, bos_id=2, eos_id=eos)
            with tempfile.TemporaryDirectory() as tmp:
                proto = pathlib.Path(sentencepiece_model(pathlib.Path(tmp), gemma=kind == "gemma", **ids)).read_bytes()
            tokenizer = getattr(kh.keras_hub.models, f"{kind.capitalize()}Tokenizer")(proto=proto)
        causal_lm = getattr(kh.keras_hub.models, f"{kind.upper() if kind == 'gpt2' else kind.capitalize()}CausalLM")
        preprocessor = getattr(kh.keras_hub.models, f"{causal_lm.__name__}Preprocessor")(tokenizer)
        named = causal_lm(backbone=model.backbone, preprocessor=preprocessor)
        return Family(model, eos, expected, named, config_pad=0, needs_eos=True)
    nnx = pytest.importorskip("flax.nnx")
    from jax2onnx_examples.llama import Llama, LlamaConfig

    model = Llama(LlamaConfig(pad_token_id=None), rngs=nnx.Rngs(0))
    named = Llama(LlamaConfig(pad_token_id=CONFIG_PAD), rngs=nnx.Rngs(0))
    eos = model.__jax2onnx_decoder__().eos_token_id
    return Family(model, eos, np.asarray(model.generate(*left_pad(PROMPTS, 0), NEW_TOKENS)), named)


def _export_args(fam: Family, source: str) -> tuple[object, dict, int]:
    """(model, export_causal_lm keywords, the pad id the folder must name) for a pad source."""
    eos = {"eos_token_id": fam.eos} if fam.needs_eos else {}
    if source == "config":
        # the model names its end token too (KerasHub GPT2: its preprocessor); its own tokenizer is not written
        return fam.with_config_pad, {"tokenizer": False}, fam.config_pad
    if source == "tokenizer":  # the tokenizer names the end token too where the model does not
        return fam.model, {"tokenizer": fast_tokenizer(128, fam.eos)}, TOKENIZER_PAD
    if source == "argument":
        return fam.model, {**eos, "pad_token_id": ARGUMENT_PAD}, ARGUMENT_PAD
    return fam.model, eos, fam.eos  # none: the end token pads, as Hugging Face checkpoints without one are padded


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("name", FAMILIES)
def test_padding_never_changes_a_token(tmp_path, name, source):
    require_genai()
    fam = family(name)
    model, kwargs, pad = _export_args(fam, source)
    folder = export_causal_lm(model, tmp_path / "m", max_length=64, **kwargs)
    config = check_folder(folder)
    assert config["model"]["pad_token_id"] == pad and config["model"]["eos_token_id"] == fam.eos
    batch = greedy(folder, PROMPTS, NEW_TOKENS)  # left-padded with the folder's pad id
    alone = [greedy(folder, [p], NEW_TOKENS)[0] for p in PROMPTS]
    assert batch == alone, f"padding with {pad} changed tokens: batch {batch}, alone {alone}"
    for row, want in enumerate(fam.expected):
        want = until_eos(want, fam.eos)
        assert until_eos(batch[row], fam.eos) == want and len(want) == NEW_TOKENS, (row, batch[row], want)


def test_resolution_order():
    """The argument, then the model, then the tokenizer; the pad id falls back to the (first) end token."""
    from test_spec import tiny_jax_decoder

    spec = dataclasses.replace(tiny_jax_decoder(), bos_token_id=None, eos_token_id=[9, 8], pad_token_id=None)
    tok = fast_tokenizer(96, eos=10)  # names pad 13 and end 10
    assert special_tokens.resolve(spec, None, {}).pad_token_id == 9
    resolved = special_tokens.resolve(spec, tok, {})
    assert (resolved.pad_token_id, resolved.eos_token_id, resolved.bos_token_id) == (TOKENIZER_PAD, [9, 8], None)
    assert special_tokens.resolve(dataclasses.replace(spec, pad_token_id=3), tok, {}).pad_token_id == 3
    assert special_tokens.resolve(dataclasses.replace(spec, pad_token_id=3), tok, {"pad_token_id": 4}).pad_token_id == 4
    assert special_tokens.resolve(dataclasses.replace(spec, eos_token_id=None), tok, {}).eos_token_id == 10


def test_tokenizer_folder_names_its_pad_token(tmp_path):
    from test_spec import tiny_jax_decoder

    fast_tokenizer(96, eos=10).save_pretrained(str(tmp_path / "tok"))
    assert special_tokens.tokenizer_ids(tmp_path / "tok") == {"eos_token_id": 10, "pad_token_id": TOKENIZER_PAD}
    spec = dataclasses.replace(tiny_jax_decoder(), pad_token_id=None)
    folder = export_causal_lm(spec, tmp_path / "m", max_length=32, tokenizer=tmp_path / "tok")
    assert json.loads((folder / "genai_config.json").read_text())["model"]["pad_token_id"] == TOKENIZER_PAD


@pytest.mark.parametrize("field", ["eos_token_id", "bos_token_id", "pad_token_id"])
def test_token_ids_outside_the_vocabulary_are_refused_before_writing(tmp_path, field):
    """The README's old GPT-2 example: a 64-token config with GPT-2's real ids (50256), which
    onnxruntime-genai refuses at load time (``eos_token_id (50256) must be in range [0, 64)``)."""
    tf = pytest.importorskip("transformers", reason="transformers provides the model")
    ids = {"bos_token_id": 0, "eos_token_id": 63, field: 50256}
    model = tf.FlaxGPT2LMHeadModel(tf.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, **ids))
    with pytest.raises(OptionError) as exc:
        export_causal_lm(model, tmp_path / "m", max_length=32)
    message = str(exc.value)
    assert f"{field} (50256, from the transformers FlaxGPT2LMHeadModel model) must be in range [0, 64)" in message
    assert f"pass {field}=<an id below 64>" in message and "\n" not in message
    assert not (tmp_path / "m").exists() and not list(tmp_path.iterdir())
    folder = export_causal_lm(model, tmp_path / "m", max_length=32, **{field: 5})  # the fix the message names
    assert json.loads((folder / "genai_config.json").read_text())["model"][field] == 5


def test_an_argument_outside_the_vocabulary_is_refused(tmp_path):
    from test_spec import tiny_jax_decoder

    with pytest.raises(OptionError, match=r"pad_token_id \(96, from the pad_token_id= argument\) must be in range \[0, 96\)"):
        export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=32, pad_token_id=96)
    with pytest.raises(OptionError, match=r"eos_token_id \(-1, from the eos_token_id= argument\)"):
        export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=32, eos_token_id=[5, -1])
    assert not list(tmp_path.iterdir())

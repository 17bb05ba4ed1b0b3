"""What the tests of Google's ``gemma`` library front-end share: the library imported without its
process-wide side effect leaking, random params for a config, a tiny SentencePiece tokenizer, and
the library's greedy tokens from its forward pass."""

from __future__ import annotations

import io

import numpy as np
import pytest

linen = pytest.importorskip("flax.linen")
_FLAX_PARAM = linen.Module.param
gm = pytest.importorskip("gemma.gm", reason="the gemma library (pip install gemma, see docs/guide/llm.md) is not "
                                           "installed")
# Importing gemma.gm replaces flax.linen.Module.param for the whole process (its utils/_dtype_params.py)
# with one that passes a dtype positionally to every init function: a Hugging Face Flax model built
# afterwards in the same process fails ("takes 2 positional arguments but 3 were given"). The test
# worker runs other modules' tests too, so flax's own param is put back at once and the library's
# only while a gemma library test module's tests run (each imports this fixture).
_GEMMA_PARAM = linen.Module.param
linen.Module.param = _FLAX_PARAM


@pytest.fixture(scope="module", autouse=True)
def gemma_param_in_this_module_only():
    linen.Module.param = _GEMMA_PARAM
    yield
    linen.Module.param = _FLAX_PARAM


import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from llm_test_helpers import NEW_TOKENS  # noqa: E402

PAD, EOS = 0, 1  # the library's tokenizers'
VOCAB = 400


def random_params(model, seed=2):
    """Random params of the shapes the library's init gives (traced, not run: its jitted init would
    cost more than the whole export). Every weight random, the norms' too (the library's init leaves
    them at scale 1 or 0); a small embedding table, so that the tied head does not just echo the last
    token."""
    shapes = jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), jnp.ones((1, 8), jnp.int32)))["params"]
    leaves, tree = jax.tree_util.tree_flatten_with_path(shapes)
    keys = jax.random.split(jax.random.PRNGKey(seed), len(leaves))
    params = [(0.02 if "embedder" in jax.tree_util.keystr(path) else 0.5) * jax.random.normal(key, a.shape, a.dtype)
              for (path, a), key in zip(leaves, keys)]
    return jax.tree_util.tree_unflatten(tree, params)  # {"layer_0": ..., "embedder": ...}, as the library passes them


def tiny_tokenizer(folder, tokenizer_class=None, **unlike_gemma):
    """A SentencePiece model trained here with Gemma's settings (BPE, byte fallback, no dummy prefix,
    no whitespace folding, pad/eos/bos/unk 0-3; ``unlike_gemma`` overrides them), as the library's
    ``tokenizer_class`` (its Gemma 2 tokenizer unless given)."""
    import sentencepiece as spm

    text = ["The quick brown fox jumps over the lazy dog.", "Hello world! How are you today?",
            "JAX to ONNX exports Gemma models.", "Numbers 12345 and symbols #@! are here.",
            "A small tiny model speaks in short sentences about cats and dogs."] * 20
    proto = io.BytesIO()
    gemma = dict(vocab_size=VOCAB, model_type="bpe", pad_id=PAD, eos_id=EOS, bos_id=2, unk_id=3,
                 normalization_rule_name="identity", add_dummy_prefix=False, remove_extra_whitespaces=False,
                 split_digits=True, byte_fallback=True, character_coverage=1.0, minloglevel=2)
    spm.SentencePieceTrainer.train(sentence_iterator=iter(text), model_writer=proto, **{**gemma, **unlike_gemma})
    path = folder / "tokenizer.model"
    path.write_bytes(proto.getvalue())
    return (tokenizer_class or gm.text.Gemma2Tokenizer)(path=str(path))


def library_greedy(model, params, prompts):
    """The library's greedy tokens: its forward pass over each whole sequence so far, per step (the
    batch right-padded with its pad id 0, which its causal mask never lets a real token see)."""
    width = max(len(p) for p in prompts) + NEW_TOKENS
    tokens = np.full((len(prompts), width), PAD, np.int32)
    lengths = np.array([len(p) for p in prompts])
    for row, p in enumerate(prompts):
        tokens[row, : len(p)] = p
    forward = jax.jit(lambda t: model.apply({"params": params}, t).logits)
    for _ in range(NEW_TOKENS):
        logits = np.asarray(forward(tokens))
        nxt = logits[np.arange(len(prompts)), lengths - 1].argmax(-1)
        assert (nxt != PAD).all(), "the tiny model generated the pad id, which the library reads as padding"
        tokens[np.arange(len(prompts)), lengths] = nxt
        lengths += 1
    return [tokens[row, len(p): len(p) + NEW_TOKENS].tolist() for row, p in enumerate(prompts)]


def sampler_tokens(model, params, tokenizer, texts, ends):
    """The library's ``gm.text.Sampler`` (greedy, its own cache) on ``texts``: each row's tokens up to
    the first of ``ends``."""
    from jax2onnx_llm.genai_run import until_eos

    sampler = gm.text.Sampler(model=model, params=params, tokenizer=tokenizer, cache_length=96,
                              max_out_length=NEW_TOKENS, pad_length=None)
    state = sampler.sample(texts, max_new_tokens=NEW_TOKENS, return_state=True).state
    return [until_eos(row, ends) for row in np.asarray(state.predicted_tokens)]

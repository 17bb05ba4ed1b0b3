"""The remaining transformers 4.x Flax causal LMs (issue #32, outcome 4): GPT-Neo, GPT-J, OPT (pre-
and post-LN), Bloom, XGLM. Tiny random configs built here (nothing downloaded); onnxruntime-genai's
greedy tokens equal the library's own ``generate`` (greedy, the Flax model) for one prompt and a
left-padded batch of three, with each row generating what its prompt generates alone. Padding for
every way the pad id is given or missing is ``test_padding.py``'s (these families are in its list)."""

from __future__ import annotations

import jax
import pytest
from jax2onnx_llm import export_causal_lm
from llm_test_helpers import assert_fused_attention, assert_same_tokens, check_folder

tf = pytest.importorskip("transformers", reason="transformers (4.x, with its Flax classes) provides the models")
pytest.importorskip("flax", reason="transformers' Flax models need flax")

from test_transformers_flax import BOS, EOS, PAD, hf_reference  # noqa: E402

TOKENS = dict(vocab_size=128, bos_token_id=BOS, eos_token_id=EOS, pad_token_id=PAD)


def _config(family: str, **overrides):
    if family == "gptneo":  # a global then a local layer, its window shorter than the sequences
        return tf.GPTNeoConfig(**{**dict(num_layers=2, attention_types=[[["global", "local"], 1]], hidden_size=32,
                                         num_heads=4, intermediate_size=64, max_position_embeddings=128, window_size=5,
                                         **TOKENS), **overrides})
    if family == "gptj":  # rotary on 4 of each head's 8 dims (GPT-J's partial, interleaved rotary)
        return tf.GPTJConfig(**{**dict(n_layer=2, n_embd=32, n_head=4, rotary_dim=4, n_positions=128, **TOKENS),
                                **overrides})
    if family in ("opt", "opt-post-ln"):  # post-LN with project_in/out: OPT-350m's form
        post = dict(do_layer_norm_before=False, word_embed_proj_dim=16) if family == "opt-post-ln" else {}
        base = dict(num_hidden_layers=2, hidden_size=32, num_attention_heads=4, ffn_dim=64,
                    max_position_embeddings=128, word_embed_proj_dim=32, **TOKENS)
        return tf.OPTConfig(**{**base, **post, **overrides})
    if family == "bloom":
        return tf.BloomConfig(**{**dict(n_layer=2, hidden_size=32, n_head=4, initializer_range=0.3, **TOKENS),
                                 **overrides})
    if family == "xglm":
        return tf.XGLMConfig(**{**dict(num_layers=2, d_model=32, attention_heads=4, ffn_dim=64,
                                       max_position_embeddings=128, **TOKENS), **overrides})
    raise ValueError(family)


MODELS = {"gptneo": "FlaxGPTNeoForCausalLM", "gptj": "FlaxGPTJForCausalLM", "opt": "FlaxOPTForCausalLM",
          "opt-post-ln": "FlaxOPTForCausalLM", "bloom": "FlaxBloomForCausalLM", "xglm": "FlaxXGLMForCausalLM"}
#: weight scales that make the tiny random models' greedy sequences vary (at the library's 0.02
#: init every step repeats a token)
SCALES = {"gptneo": {"kernel": 6.0}, "gptj": {"kernel": 3.0}, "opt": {"kernel": 3.0}, "opt-post-ln": {"kernel": 3.0},
          "bloom": {"kernel": 3.0}, "xglm": {"kernel": 6.0}}


def make(family: str, **overrides):
    """A tiny random model of ``family``; ``overrides`` change its config."""
    model = getattr(tf, MODELS[family])(_config(family, **overrides), seed=0)
    scales = SCALES[family]

    def scale(path, x):
        name = jax.tree_util.keystr(path)
        return x * next((f for key, f in scales.items() if key in name), 1.0)

    model.params = jax.tree_util.tree_map_with_path(scale, model.params)
    return model


@pytest.mark.parametrize("target", ["onnxruntime", "onnx"])
@pytest.mark.parametrize("cache", ["concat", "shared"])
@pytest.mark.parametrize("family", list(MODELS))
def test_generates_the_library_tokens(tmp_path, family, cache, target):
    model = make(family)
    folder = export_causal_lm(model, tmp_path / family, max_length=64, cache=cache, target=target)
    config = check_folder(folder)
    assert config["model"]["type"] == "decoder"
    assert config["model"]["eos_token_id"] == EOS and config["model"]["pad_token_id"] == PAD
    # each library attention layer became one fused attention (GPT-J: its partial interleaved rotary
    # as a RotaryEmbedding on q and k; GPT-Neo's local window and Bloom's ALiBi in the op's bias)
    assert_fused_attention(folder, target, 2, rotary="op" if family == "gptj" else None, cache=cache)
    assert_same_tokens(folder, hf_reference(model), pad_token_id=PAD, eos=EOS)


@pytest.mark.parametrize("family", list(MODELS))
def test_a_declined_region_is_the_library_code(tmp_path, family):
    """Standard ONNX below opset 23 has no ``Attention``: each region lowers its body, the library's
    own attention call (GPT-J's positions, Bloom's residual and ALiBi among its operands), and the
    tokens stay the library's."""
    onnx = pytest.importorskip("onnx")
    model = make(family)
    folder = export_causal_lm(model, tmp_path / family, max_length=64, cache="concat", target="onnx", opset=21)
    check_folder(folder)
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    kinds = {n.op_type for n in graph.node}
    assert not kinds & {"Attention", "RotaryEmbedding", "GroupQueryAttention"}, kinds
    assert_same_tokens(folder, hf_reference(model), pad_token_id=PAD, eos=EOS)


def test_gpt_neo_local_window_matters():
    """The tiny GPT-Neo's local window changes the library's own tokens, so the fused op's window
    (its additive mask) is what ``test_generates_the_library_tokens`` checks, not a no-op."""
    from llm_test_helpers import PROMPTS

    windowed = hf_reference(make("gptneo"))(PROMPTS)
    unwindowed = hf_reference(make("gptneo", window_size=256))(PROMPTS)
    assert (windowed != unwindowed).any(), windowed


def test_gpt_j_without_rotary_dim_runs_the_library_attention(tmp_path):
    """GPT-J without ``rotary_dim`` rotates by a table over the whole hidden size (the library runs it
    with one head only): the region declines, the library's attention runs, the tokens are its own."""
    from test_fallbacks_llm import assert_fused_layers

    model = make("gptj", rotary_dim=None, n_head=1)
    folder = export_causal_lm(model, tmp_path / "gptj", max_length=64, cache="shared", target="onnxruntime")
    check_folder(folder)
    assert_fused_layers(folder, "onnxruntime", 0)
    assert_same_tokens(folder, hf_reference(model), pad_token_id=PAD, eos=EOS)


@pytest.mark.parametrize("family", list(MODELS))
def test_float16_and_int4(tmp_path, family):
    """The families at reduced precision on ``target="onnxruntime"``: float16 generates the library's
    own tokens; int4 quantizes every weight matmul (``MatMulNBits``; OPT's post-LN ``project_out`` feeds
    the tied head directly, two weight matmuls in a row) and generates in onnxruntime-genai."""
    from jax2onnx_llm.genai_run import greedy
    from llm_test_helpers import NEW_TOKENS, PROMPTS, op_counts

    model = make(family)
    half = export_causal_lm(model, tmp_path / "f16", max_length=64, precision="float16", target="onnxruntime")
    check_folder(half)
    assert_same_tokens(half, hf_reference(model), pad_token_id=PAD, eos=EOS)
    int4 = export_causal_lm(model, tmp_path / "int4", max_length=64, precision="int4", target="onnxruntime")
    check_folder(int4)
    counts = op_counts(int4)
    # per layer: the input projections (q/k/v, and GPT-J's parallel MLP input, packed into one op of
    # their shared activation: packed_projections.py), the attention output, the MLP's output
    assert counts.get(("com.microsoft", "MatMulNBits"), 0) >= 2 * 3, counts
    assert ("", "MatMul") not in counts, counts
    got = greedy(int4, PROMPTS, NEW_TOKENS)
    assert [len(row) for row in got] == [NEW_TOKENS] * len(PROMPTS)

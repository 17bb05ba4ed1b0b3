"""KerasHub's Qwen 3.5 with Gated DeltaNet (``linear_attention``) layers between its attention layers
(``frontends/keras_hub/recurrent/``, ``stateful.py``): the layer's math against the library's layer on
random inputs (JAX and the exported ONNX), then tiny random hybrid models exported and generated in
onnxruntime-genai (their convolution and recurrent states carried as ``past.%d.conv`` /
``past.%d.recurrent``), whose greedy tokens must equal the library's, for one prompt and a left-padded
batch of three.

The library's tokens come from its own cached step, one token at a time (``call_with_cache`` from an
empty cache: its per-token Gated DeltaNet recurrence and convolution window), each prompt alone. Not
from ``generate``: KerasHub's Qwen 3.5 ``generate`` prefills its whole right-padded buffer into the
recurrent state and then runs the last prompt token through it a second time, so its tokens are not
those of its own forward pass (see the guide)."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx_llm import export_causal_lm
from jax2onnx_llm.errors import OptionError
from llm_test_helpers import NEW_TOKENS, PROMPTS, assert_same_tokens, built_once, keras_hub_under_jax, require_genai

keras, keras_hub = keras_hub_under_jax()
M = keras_hub.models
VOCAB = 128
EOS = 127
# two linear-attention layers around one attention layer; 2 key heads shared by 4 value heads
HYBRID = dict(vocabulary_size=VOCAB, num_layers=3, num_query_heads=4, num_key_value_heads=2, head_dim=8, hidden_dim=32,
              layer_types=["linear_attention", "full_attention", "linear_attention"], linear_num_key_heads=2,
              linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8, linear_conv_kernel_dim=4)


def _make(family: str):
    keras.utils.set_random_seed(0)
    if family == "qwen3_5":
        model = M.Qwen3_5CausalLM(preprocessor=None, backbone=M.Qwen3_5Backbone(**HYBRID, intermediate_dim=64))
    else:
        model = M.Qwen3_5MoeCausalLM(preprocessor=None, backbone=M.Qwen3_5MoeBackbone(
            **HYBRID, moe_intermediate_dim=16, shared_expert_intermediate_size=32, num_experts=4, top_k=2))
    rng = np.random.default_rng(0)
    for v in model.backbone.weights:
        if "kernel" in v.path or "experts/" in v.path:  # small random blocks leave the embedding in charge
            v.assign(v.numpy() * 8.0)
        elif v.path.endswith(("A_log", "dt_bias")):  # the library initializes them constant: make each head decay its own way
            v.assign(rng.normal(size=v.shape).astype("float32"))
    return model


def greedy_one_token_at_a_time(one_token, empty, prompts) -> np.ndarray:
    """``(batch, NEW_TOKENS)`` greedy tokens, each prompt alone from the ``empty`` cache, fed one token
    at a time through ``one_token(token, cache, index) -> (last logits, cache)``."""
    rows = []
    for prompt in prompts:
        cache, tokens = empty, list(prompt)
        for index in range(len(prompt) + NEW_TOKENS - 1):
            logits, cache = one_token(jnp.asarray([[tokens[index]]], jnp.int32), cache, index)
            if index >= len(prompt) - 1:
                tokens.append(int(jnp.argmax(logits)))
        rows.append(tokens[len(prompt):])
    return np.asarray(rows)


def library_reference(model):
    """``reference(prompts) -> (batch, NEW_TOKENS)``: the library's greedy tokens, each prompt alone, fed
    one token at a time through its ``call_with_cache`` (jitted once; the cache buffer fits every prompt)."""
    backbone = model.backbone
    length = max(len(p) for p in PROMPTS) + NEW_TOKENS
    layers = backbone.num_layers
    key_dim = backbone.linear_num_key_heads * backbone.linear_key_head_dim
    conv_dim = 2 * key_dim + backbone.linear_num_value_heads * backbone.linear_value_head_dim
    empty = (jnp.zeros((1, layers, 2, length, backbone.num_key_value_heads, backbone.head_dim)),
             jnp.zeros((1, layers, conv_dim, backbone.linear_conv_kernel_dim - 1)),
             jnp.zeros((1, layers, backbone.linear_num_value_heads, backbone.linear_key_head_dim,
                        backbone.linear_value_head_dim)))

    @jax.jit
    def one_token(token, cache, index):
        logits, _, cache = model.call_with_cache(token, cache, index)
        return logits[0, -1], cache

    def reference(prompts):
        return greedy_one_token_at_a_time(one_token, empty, prompts)

    return reference


def assert_padding_changes_nothing(folder, pad_token_id: int) -> None:
    """The folder's graph in plain onnxruntime: a prefill of a prompt after two pad tokens ends in the
    logits and states of the prompt alone (a finer check than tokens, which small state changes may
    leave as they are)."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])

    def prefill(ids):
        feeds = {"input_ids": np.asarray([ids], np.int32), "attention_mask": np.ones((1, len(ids)), np.int32)}
        for i in session.get_inputs()[2:]:  # empty caches, zero states
            feeds[i.name] = np.zeros([1, *[d if isinstance(d, int) else 0 for d in i.shape[1:]]], np.float32)
        names = [o.name for o in session.get_outputs()]
        return {n: v for n, v in zip(names, session.run(None, feeds)) if n == "logits" or ".key" not in n and ".value" not in n}

    alone, padded = prefill(PROMPTS[1]), prefill([pad_token_id] * 2 + PROMPTS[1])
    np.testing.assert_allclose(padded["logits"][:, 2:], alone["logits"], rtol=1e-5, atol=1e-5)
    for name in alone:
        if name != "logits":
            np.testing.assert_allclose(padded[name], alone[name], rtol=1e-5, atol=1e-6, err_msg=name)


def _library_layer(model):
    return next(layer for layer in model.backbone.transformer_layers if layer.layer_type == "linear_attention")


def _library_token_by_token(layer, x, conv, memory):
    """KerasHub's layer over ``x`` one token at a time (its decode form: the convolution window and the
    per-token recurrence), from the given states: the outputs ``(batch, sequence, hidden)`` and states."""
    outs = []
    for t in range(x.shape[1]):
        out, (conv, memory) = layer(x[:, t : t + 1], cache=(conv, memory), cache_update_index=t)
        outs.append(np.asarray(out))
    return np.concatenate(outs, axis=1), np.asarray(conv), np.asarray(memory)


def _random_case(seed: int, seq: int):
    rng = np.random.default_rng(seed)
    return (rng.normal(size=(2, seq, 32)).astype(np.float32), rng.normal(size=(2, 64, 3)).astype(np.float32),
            (0.3 * rng.normal(size=(2, 4, 8, 8))).astype(np.float32))


def test_gated_delta_net_is_the_library_layer():
    """The step's Gated DeltaNet over 6 new tokens at once against KerasHub's layer fed them one at a
    time, from random states (outputs and both states); left padding changes no state (two pad tokens
    before a prompt give the prompt's own outputs and states). (KerasHub's chunked prefill form is the
    same math; it takes a minute to compile eagerly, so it is not run here.)"""
    from jax2onnx_llm.frontends.keras_hub.recurrent.gated_delta import gated_delta_net

    layer = _library_layer(_make("qwen3_5"))._linear_attn
    x, conv, memory = _random_case(1, 6)
    want = _library_token_by_token(layer, x, conv, memory)
    got = gated_delta_net(layer, jnp.asarray(x), conv, memory)
    for w, g in zip(want, got):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-4)
    rng = np.random.default_rng(3)
    padded = np.concatenate([rng.normal(size=(2, 2, 32)).astype(np.float32), x], axis=1)
    pad = np.arange(8)[None, :].repeat(2, 0) < 2
    zeros = np.zeros_like(conv), np.zeros_like(memory)
    alone = gated_delta_net(layer, jnp.asarray(x), *zeros)
    in_padding = gated_delta_net(layer, jnp.asarray(padded), *zeros, jnp.asarray(pad))
    np.testing.assert_allclose(np.asarray(in_padding[0][:, 2:]), np.asarray(alone[0]), rtol=1e-5, atol=1e-5)
    for w, g in zip(alone[1:], in_padding[1:]):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-5, atol=1e-6)
    unmarked = gated_delta_net(layer, jnp.asarray(padded), *zeros)  # the padding handling is what makes them equal
    assert not np.allclose(np.asarray(unmarked[2]), np.asarray(alone[2]), atol=1e-3)


def test_gated_delta_net_in_onnxruntime_is_the_library_layer(tmp_path):
    """The same layer exported alone (symbolic batch and sequence) and run in onnxruntime: the library's
    outputs and states, for 6 new tokens and for one."""
    import onnxruntime as ort
    from jax2onnx import to_onnx
    from jax2onnx_llm.frontends.keras_hub.recurrent.gated_delta import gated_delta_net

    layer = _library_layer(_make("qwen3_5"))._linear_attn
    path = tmp_path / "gdn.onnx"
    to_onnx(lambda x, c, m: gated_delta_net(layer, x, c, m),
            [("B", "S", 32), ("B", 64, 3), ("B", 4, 8, 8)], return_mode="file", output_path=str(path))
    onnx.checker.check_model(str(path), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for seed, seq in ((1, 6), (2, 1)):
        feeds = _random_case(seed, seq)
        want = _library_token_by_token(layer, *feeds)
        got = session.run(None, dict(zip(names, feeds)))
        for w, g in zip(want, got):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module", params=["qwen3_5", "qwen3_5_moe"])
def exported(request):
    model = _make(request.param)

    def build(root):  # once per session, not per xdist worker
        export_causal_lm(model, root / "model", max_length=64, eos_token_id=EOS)

    return model, built_once(f"test_keras_hub_recurrent-{request.param}", build)[0] / "model"


def test_hybrid_folder_declares_its_states(exported):
    """The full ONNX check passes; the attention layer has keys and values, the linear-attention layers a
    conv and a recurrent state of the library's shapes, and genai_config.json names both kinds."""
    model, folder = exported
    onnx.checker.check_model(str(folder / "model.onnx"), full_check=True)
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    shapes = {i.name: [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim] for i in graph.input}
    assert shapes["past.0.conv"] == ["batch_size", 64, 3] and shapes["past.2.conv"] == ["batch_size", 64, 3]
    assert shapes["past.0.recurrent"] == ["batch_size", 4, 8, 8]
    assert "past_key_values.1.key" in shapes and "past_key_values.0.key" not in shapes
    assert "past.1.conv" not in shapes
    decoder = json.loads((folder / "genai_config.json").read_text())["model"]["decoder"]
    assert decoder["inputs"]["past_conv_names"] == "past.%d.conv"
    assert decoder["outputs"]["present_recurrent_names"] == "present.%d.recurrent"
    outputs = {o.name for o in graph.output}
    assert {"present.0.conv", "present.2.recurrent", "present.1.value"} <= outputs


def test_hybrid_generates_the_library_tokens(exported):
    """onnxruntime-genai's greedy tokens are the library's, alone and in a left-padded batch of three."""
    model, folder = exported
    assert_padding_changes_nothing(folder, 0)
    require_genai()
    assert_same_tokens(folder, library_reference(model), pad_token_id=0, eos=EOS)


@pytest.mark.parametrize("target", ["qdq", "web"])
def test_attention_only_targets_are_refused_before_anything_is_written(tmp_path, target):
    """The static NPU graphs and the browser folder hold attention caches only: a hybrid is refused
    in one line, nothing written."""
    model = _make("qwen3_5")
    with pytest.raises(OptionError, match="carry recurrent state") as e:
        export_causal_lm(model, tmp_path / "q", max_length=32, eos_token_id=EOS, target=target)
    assert "\n" not in str(e.value) and not (tmp_path / "q").exists()


# --- RWKV-7: every layer recurrent, the step the library's own call_with_cache ---

RWKV = dict(hidden_size=32, head_size=8, num_layers=2, vocabulary_size=VOCAB, intermediate_dim=64, gate_lora=8,
            mv_lora=8, aaa_lora=8, decay_lora=8)
RWKV_PAD = 3  # no prompt begins with it


def _make_rwkv7():
    keras.utils.set_random_seed(0)
    model = M.RWKV7CausalLM(M.RWKV7Backbone(**RWKV))
    for v in model.backbone.weights:
        if "kernel" in v.path:
            v.assign(v.numpy() * 3.0)
    return model


def rwkv7_reference(model):
    """The library's greedy tokens, each prompt alone, one token at a time through its ``call_with_cache``
    in its single-token (RNN) form from the empty state its ``_build_cache`` starts from."""
    backbone = model.backbone
    heads = backbone.hidden_size // backbone.head_size
    empty = [jnp.zeros((1, backbone.num_layers, heads, backbone.head_size, backbone.head_size)),
             jnp.zeros((1, backbone.num_layers, 2, 1, backbone.hidden_size))]

    @jax.jit
    def one_token(token, cache, index):  # the RNN form reads no position
        logits, _, cache = model.call_with_cache(token, cache, rnn_mode=True)
        return logits[0, -1], cache

    def reference(prompts):
        return greedy_one_token_at_a_time(one_token, empty, prompts)

    return reference


def test_rwkv7_block_in_onnxruntime_is_the_library_block(tmp_path):
    """One RWKV-7 block exported alone (symbolic batch and sequence: the library's multi-token loop) and
    run in onnxruntime: the library's block fed the same tokens one at a time (its RNN form), outputs,
    state and both token-shift inputs."""
    import onnxruntime as ort
    from jax2onnx import to_onnx

    block = _make_rwkv7().backbone.rwkv_layers[1]

    def run(x, state, shifts, rnn_mode=False):
        out, _, state, tmix, cmix = block.generate_call(
            x, v_first=x, padding_mask=jnp.ones(x.shape[:2], bool), cache_state=state, cache_tmix_x=shifts[:, :1],
            cache_cmix_x=shifts[:, 1:], rnn_mode=rnn_mode)
        return out, state, jnp.concatenate([tmix, cmix], axis=1)

    path = tmp_path / "rwkv7_block.onnx"
    to_onnx(run, [("B", "S", 32), ("B", 4, 8, 8), ("B", 2, 32)], return_mode="file", output_path=str(path))
    onnx.checker.check_model(str(path), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 5, 32)).astype(np.float32)
    state = (0.3 * rng.normal(size=(2, 4, 8, 8))).astype(np.float32)
    shifts = rng.normal(size=(2, 2, 32)).astype(np.float32)
    got = session.run(None, dict(zip([i.name for i in session.get_inputs()], (x, state, shifts))))
    outs, s, sh = [], state, shifts
    for t in range(x.shape[1]):
        out, s, sh = run(x[:, t : t + 1], s, sh, rnn_mode=True)
        outs.append(np.asarray(out))
    for want, have in zip((np.concatenate(outs, axis=1), s, sh), got):
        np.testing.assert_allclose(have, np.asarray(want), rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def rwkv7_exported():
    model = _make_rwkv7()

    def build(root):  # once per session, not per xdist worker
        # a pad id other than 0: the library masks token 0 wherever it is, the graph must find this padding itself
        export_causal_lm(model, root / "model", max_length=64, eos_token_id=EOS, pad_token_id=RWKV_PAD)

    return model, built_once("test_keras_hub_recurrent-rwkv7", build)[0] / "model"


def test_rwkv7_generates_the_library_tokens(rwkv7_exported):
    """onnxruntime-genai carries each layer's state and token shifts (no key/value cache at all) and
    generates the library's greedy tokens, alone and in a batch of three left-padded with the folder's
    pad id (not 0, which the library itself masks)."""
    model, folder = rwkv7_exported
    onnx.checker.check_model(str(folder / "model.onnx"), full_check=True)
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    assert not [i.name for i in graph.input if "key" in i.name or "value" in i.name]
    decoder = json.loads((folder / "genai_config.json").read_text())["model"]["decoder"]
    assert "past_key_names" not in decoder["inputs"] and decoder["inputs"]["past_recurrent_names"] == "past.%d.recurrent"
    assert_padding_changes_nothing(folder, RWKV_PAD)
    require_genai()
    assert_same_tokens(folder, rwkv7_reference(model), pad_token_id=RWKV_PAD, eos=EOS)

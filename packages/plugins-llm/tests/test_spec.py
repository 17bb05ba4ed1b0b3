"""The core path: a decoder written as a JAX function (DecoderSpec) and the examples pack's NNX Llama,
exported with both cache layouts and run in onnxruntime-genai."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx_llm import DecoderSpec, attend, export_causal_lm, rotary_tables
from jax2onnx_llm.genai_run import left_pad
from jax2onnx_llm.reference import greedy_generate
from llm_test_helpers import NEW_TOKENS, assert_fused_attention, assert_same_tokens, check_folder

VOCAB, HIDDEN, HEADS, KV_HEADS, LAYERS = 96, 32, 4, 2, 2
HEAD = HIDDEN // HEADS
EOS = VOCAB - 1


def tiny_jax_decoder(seed: int = 0) -> DecoderSpec:
    """A two-layer pre-norm decoder as plain JAX: RMSNorm, RoPE, grouped-query attention, SwiGLU."""
    keys = iter(jax.random.split(jax.random.PRNGKey(seed), 32))

    def w(*shape, scale=0.3):
        return jax.random.normal(next(keys), shape) * scale

    params = {
        "embed": w(VOCAB, HIDDEN, scale=1.0),
        "layers": [
            {"q": w(HIDDEN, HEADS * HEAD), "k": w(HIDDEN, KV_HEADS * HEAD), "v": w(HIDDEN, KV_HEADS * HEAD),
             "o": w(HEADS * HEAD, HIDDEN), "gate": w(HIDDEN, 64), "up": w(HIDDEN, 64), "down": w(64, HIDDEN)}
            for _ in range(LAYERS)
        ],
        "head": w(HIDDEN, VOCAB),
    }

    def rms(x):
        return x * jax.lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + 1e-6)

    def step(p, input_ids, attention_mask, position_ids, cache):
        b, s = input_ids.shape
        x = p["embed"][input_ids]
        rot = rotary_tables(position_ids, HEAD)
        for i, layer in enumerate(p["layers"]):
            h = rms(x)
            q = (h @ layer["q"]).reshape(b, s, HEADS, HEAD)
            k = (h @ layer["k"]).reshape(b, s, KV_HEADS, HEAD)
            v = (h @ layer["v"]).reshape(b, s, KV_HEADS, HEAD)
            x = x + attend(cache, i, q, k, v, rotary=rot).reshape(b, s, HIDDEN) @ layer["o"]
            h = rms(x)
            x = x + (jax.nn.silu(h @ layer["gate"]) * (h @ layer["up"])) @ layer["down"]
        return rms(x) @ p["head"], cache

    return DecoderSpec(step=step, params=params, num_layers=LAYERS, num_heads=HEADS, num_kv_heads=KV_HEADS,
                       head_size=HEAD, hidden_size=HIDDEN, vocab_size=VOCAB, max_positions=128,
                       bos_token_id=1, eos_token_id=EOS, pad_token_id=0)


def uncached_greedy(spec: DecoderSpec, prompts, n: int) -> np.ndarray:
    """Greedy by recomputing the whole sequence each token (no cache): independent of the cache logic.
    The sequence sits in one buffer of its final length (prompt + ``n``), the slots not generated
    yet masked out: a causal model's logits at a position do not read later ones, so one compiled
    forward pass serves every token (eagerly, each new length compiled every op again: 30 s)."""
    from jax2onnx_llm.spec import KVCache, position_ids_from_mask

    ids, mask = left_pad(prompts, spec.pad_token_id)
    batch, prompt = ids.shape
    total = prompt + n
    buffer = np.full((batch, total), spec.pad_token_id, np.int32)
    buffer[:, :prompt] = ids
    full_mask = np.zeros((batch, total), np.int32)
    full_mask[:, :prompt] = mask

    @jax.jit
    def forward(ids, mask):
        empty = [jnp.zeros((batch, spec.num_kv_heads, 0, spec.head_size))] * spec.num_layers
        logits, _ = spec.step(spec.params, ids, mask, position_ids_from_mask(mask, total), KVCache(empty, empty, mask, "concat"))
        return logits

    out = []
    for t in range(n):
        logits = forward(jnp.asarray(buffer), jnp.asarray(full_mask))
        nxt = np.asarray(jnp.argmax(logits[:, prompt + t - 1], axis=-1)).astype(np.int32)
        out.append(nxt)
        buffer[:, prompt + t] = nxt
        full_mask[:, prompt + t] = 1
    return np.stack(out, axis=1)


def test_cached_reference_equals_uncached_recompute():
    spec = tiny_jax_decoder()
    ids, mask = left_pad([[5, 6, 7, 8, 9, 10, 11], [12, 13, 14]], 0)
    np.testing.assert_array_equal(greedy_generate(spec, ids, mask, 12), uncached_greedy(spec, [[5, 6, 7, 8, 9, 10, 11], [12, 13, 14]], 12))


@pytest.mark.parametrize("cache,target", [("concat", "onnx"), ("shared", "onnx"), ("concat", "onnxruntime"),
                                          ("shared", "onnxruntime")])
def test_jax_function_decoder(tmp_path, cache, target):
    spec = tiny_jax_decoder()
    folder = export_causal_lm(spec, tmp_path / "m", max_length=64, cache=cache, target=target)
    config = check_folder(folder)
    assert config["search"]["past_present_share_buffer"] is (cache == "shared")
    assert config["model"]["decoder"]["num_key_value_heads"] == KV_HEADS
    # onnxruntime: one fused GroupQueryAttention per layer (head_size 8: a RotaryEmbedding on q and
    # k before it, GQA's rotary wants multiples of 16); onnx: the opset-23 Attention and RotaryEmbedding.
    assert_fused_attention(folder, target, LAYERS, rotary="gqa" if target == "onnxruntime" and HEAD % 16 == 0 else "op",
                           cache=cache)

    def reference(prompts):
        return greedy_generate(spec, *left_pad(prompts, 0), NEW_TOKENS)

    assert_same_tokens(folder, reference, pad_token_id=0, eos=EOS)


@pytest.mark.parametrize("target", ["onnxruntime", "onnx"])
@pytest.mark.parametrize("cache", ["concat", "shared"])
def test_nnx_llama_reference_model(tmp_path, cache, target):
    nnx = pytest.importorskip("flax.nnx")
    from jax2onnx_examples.llama import Llama, LlamaConfig

    model = Llama(LlamaConfig(), rngs=nnx.Rngs(0))
    folder = export_causal_lm(model, tmp_path / "llama", max_length=64, cache=cache, target=target)
    config = check_folder(folder)
    assert json.loads((folder / "genai_config.json").read_text())["model"]["context_length"] == 64
    assert config["model"]["decoder"]["num_attention_heads"] == 4
    ops = [n.op_type for n in onnx.load(str(folder / "model.onnx"), load_external_data=False).graph.node]
    # per layer: one fused attention (GQA rotating q/k itself: head size 16; or Attention-23 after
    # two RotaryEmbedding), and under onnxruntime two residual norms fused with their Add
    assert_fused_attention(folder, target, 2, rotary="gqa" if target == "onnxruntime" else "op", cache=cache)
    if target == "onnxruntime":
        assert ops.count("SkipSimplifiedLayerNormalization") == 4
    else:
        assert "RMSNormalization" in ops and "SkipSimplifiedLayerNormalization" not in ops
    assert_marker_reads_flags(folder)

    def reference(prompts):
        return model.generate(*left_pad(prompts, 0), NEW_TOKENS)

    assert_same_tokens(folder, reference, pad_token_id=0, eos=2)


def assert_marker_reads_flags(folder) -> None:
    """The padding marker (export.flat_step) reads layer 0's past keys once for the slot flags (a
    Slice, or a Gather of one element per slot) and zeroes the marked slots with one Where on those
    flags: no elementwise NaN test (Equal, IsNaN) over the whole buffer, and no other layer's past
    touched before its attention."""
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    readers = [n for n in graph.node if "past_key_values.0.key" in n.input]
    assert sorted(n.op_type for n in readers if n.op_type not in ("Slice", "Gather", "Shape")) == ["Where"], readers
    where = next(n for n in readers if n.op_type == "Where")
    producer = {out: n for n in graph.node for out in n.output}
    condition = producer[where.input[0]]
    assert "past_key_values.0.key" not in condition.input, f"the Where's condition reads the whole buffer: {condition}"
    later = [n.op_type for n in graph.node if "past_key_values.1.key" in n.input]
    assert later and set(later) <= {"GroupQueryAttention", "Attention", "ScatterElements", "Slice", "Shape"}, later


def test_float16_precision_is_forwarded_to_core(tmp_path):
    """precision= goes to jax2onnx.to_onnx: float16 weights and compute, float32 inputs/outputs (so
    genai's cache stays float32), the fused ops kept, and still the model's own tokens."""
    import inspect

    from jax2onnx import to_onnx

    if "precision" not in inspect.signature(to_onnx).parameters:
        pytest.skip("this jax2onnx-core exports float32 only")
    nnx = pytest.importorskip("flax.nnx")
    from jax2onnx_examples.llama import Llama, LlamaConfig

    model = Llama(LlamaConfig(), rngs=nnx.Rngs(0))
    folder = export_causal_lm(model, tmp_path / "fp16", max_length=64, cache="shared", precision="float16")
    graph = onnx.load(str(folder / "model.onnx"), load_external_data=False).graph
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in graph.initializer)
    assert {i.name: i.type.tensor_type.elem_type for i in graph.input}["past_key_values.0.key"] == onnx.TensorProto.FLOAT
    assert sum(n.op_type == "GroupQueryAttention" for n in graph.node) == 2
    assert_same_tokens(folder, lambda prompts: model.generate(*left_pad(prompts, 0), NEW_TOKENS), pad_token_id=0, eos=2)


def test_external_data_folder_runs_in_genai(tmp_path):
    """external_data=True (automatic beyond 1.8 GB): the weights sit in model.onnx.data beside the model."""
    spec = tiny_jax_decoder()
    folder = export_causal_lm(spec, tmp_path / "m", max_length=64, external_data=True, target="onnx")
    assert (folder / "model.onnx.data").stat().st_size > 50_000
    assert (folder / "model.onnx").stat().st_size < 50_000
    assert_same_tokens(folder, lambda prompts: greedy_generate(spec, *left_pad(prompts, 0), NEW_TOKENS),
                       pad_token_id=0, eos=EOS)


def test_standard_onnx_before_opset_23_keeps_the_decomposed_attention(tmp_path):
    """Attention and RotaryEmbedding are opset-23 ops: at opset 21 the region's body (the
    decomposed attention) is written, and generates the same tokens."""
    from llm_test_helpers import op_counts

    spec = tiny_jax_decoder()
    folder = export_causal_lm(spec, tmp_path / "m", max_length=64, target="onnx", opset=21)
    check_folder(folder)
    ops = op_counts(folder)
    assert ("", "Attention") not in ops and ("", "RotaryEmbedding") not in ops and ops.get(("", "Softmax")) == LAYERS
    assert_same_tokens(folder, lambda prompts: greedy_generate(spec, *left_pad(prompts, 0), NEW_TOKENS),
                       pad_token_id=0, eos=EOS)

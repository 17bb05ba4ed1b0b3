"""The rewrite stage on layers as real libraries write them: Hugging Face's Flax ViT, BERT and GPT-2
(tiny random configs, nothing downloaded), the exact GELU HF captures with functools.partial at
import, and jax.scipy.stats.norm.cdf. A captured `jax.nn.gelu` is the jnp pack's library lowering
however it is called (one Gelu), so the HF tests check the outcome - one Gelu per layer - and the
rewrite itself is tested on GELU's arithmetic written out (what any other library's hand-written
GELU is). Each export stays within its node budget and matches JAX in onnxruntime at the default
float32 tolerances."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import onnx
import pytest
from jax2onnx import to_onnx, verify
from jax2onnx.passes.rewrite import rewrites_applied

transformers = pytest.importorskip("transformers")


def _check(fn, model, inputs, max_nodes):
    onnx.checker.check_model(model, full_check=True)
    assert len(model.graph.node) <= max_nodes, f"{len(model.graph.node)} nodes > {max_nodes}"
    report = verify(fn, model, inputs)
    assert report, report.failures()


def _gelus(model):
    """The ``approximate`` attribute of each Gelu node, in graph order."""
    return [next((a.s.decode() for a in n.attribute if a.name == "approximate"), "none")
            for n in model.graph.node if n.op_type == "Gelu"]


def _attention_heads(model):
    """(q_num_heads, kv_num_heads) of each Attention node, in graph order."""
    return [tuple(next((a.i for a in n.attribute if a.name == k), None) for k in ("q_num_heads", "kv_num_heads"))
            for n in model.graph.node if n.op_type == "Attention"]


def _ids(shape, vocab, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, size=shape).astype(np.int32)


def exact_gelu(x):
    """``jax.nn.gelu(x, approximate=False)``'s arithmetic written out (no library call to recognize)."""
    return 0.5 * x * jax.lax.erfc(-x * np.sqrt(0.5).astype(x.dtype))


def test_captured_exact_gelu_is_one_gelu():
    # as transformers' ACT2FN holds it: the library lowering fuses it, whatever the import order
    captured = functools.partial(jax.nn.gelu, approximate=False)
    model = to_onnx(captured, [("B", 16)])
    assert [n.op_type for n in model.graph.node] == ["Gelu"]
    assert rewrites_applied(model) == {}


def test_written_out_exact_gelu_is_one_gelu():
    gelu = exact_gelu
    model = to_onnx(gelu, [("B", 16)])
    assert [n.op_type for n in model.graph.node] == ["Gelu"]
    assert rewrites_applied(model) == {"gelu_exact": 1}
    x = np.linspace(-9, 9, 4 * 16, dtype=np.float32).reshape(4, 16)
    _check(gelu, model, [x], 3)


def test_normal_cdf_is_compact_and_accurate_in_the_tail():
    cdf = jax.scipy.stats.norm.cdf
    model = to_onnx(cdf, [("B", 8)])
    assert rewrites_applied(model) == {"normal_cdf": 1}
    x = np.linspace(-12, 12, 4 * 8, dtype=np.float32).reshape(4, 8)
    _check(cdf, model, [x], 20)
    # relative accuracy where 0.5 * (1 + erf) would give 0: cdf(-9) = 1.1e-19
    got = verify(cdf, model, [x], rtol=2e-6, atol=1e-30)
    assert got, got.failures()


def test_hf_flax_vit():
    cfg = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                 image_size=32, patch_size=8)
    vit = transformers.FlaxViTModel(cfg, seed=0)

    def fn(pixels):
        return vit(pixels, params=vit.params).last_hidden_state

    model = to_onnx(fn, [("B", 3, 32, 32)])
    assert _gelus(model) == ["none", "none"]  # by the rewrite stage or the patch (import order)
    assert _attention_heads(model) == [(4, 4), (4, 4)]  # HF's einsum attention, 3-D form
    _check(fn, model, [("B", 3, 32, 32)], 100)


def test_hf_flax_bert():
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, max_position_embeddings=64)
    bert = transformers.FlaxBertModel(cfg, seed=0)

    def fn(ids, mask):
        return bert(ids, attention_mask=mask, params=bert.params).last_hidden_state

    specs = [jax.ShapeDtypeStruct((2, 16), jnp.int32)] * 2
    model = to_onnx(fn, specs)
    assert _gelus(model) == ["none", "none"]
    assert _attention_heads(model) == [(4, 4), (4, 4)]  # with the padding bias as its mask
    mask = np.ones((2, 16), np.int32)
    mask[1, 10:] = 0
    _check(fn, model, [_ids((2, 16), 100), mask], 100)


def test_hf_flax_gpt2():
    cfg = transformers.GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4, n_positions=64)
    gpt2 = transformers.FlaxGPT2Model(cfg, seed=0)

    def fn(ids):
        return gpt2(ids, params=gpt2.params).last_hidden_state

    model = to_onnx(fn, [jax.ShapeDtypeStruct((2, 16), jnp.int32)])
    assert _gelus(model) == ["tanh", "tanh"]  # HF's gelu_new
    assert _attention_heads(model) == [(4, 4), (4, 4)]  # with the causal bias as its mask
    _check(fn, model, [_ids((2, 16), 100)], 80)


def test_hf_flax_gpt2_with_a_symbolic_batch():
    # the causal and padding masks are constants broadcast to the batch: computed before the
    # broadcast (the broadcast family), they fold as they do for a static batch
    cfg = transformers.GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4, n_positions=64)
    gpt2 = transformers.FlaxGPT2Model(cfg, seed=0)

    def fn(ids):
        return gpt2(ids, params=gpt2.params).last_hidden_state

    model = to_onnx(fn, [jax.ShapeDtypeStruct(("B", 16), jnp.int32)])
    assert rewrites_applied(model).get("expand_hoist", 0) > 0
    ids = _ids((3, 16), 100)
    _check(fn, model, [ids], 80)


def test_hf_flax_llama_rms_norms():
    # LlamaRMSNorm: w * (x / sqrt(mean(x * x, -1) + eps)), nine nodes each -> one RMSNormalization
    cfg = transformers.LlamaConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    llama = transformers.FlaxLlamaModel(cfg, seed=0)

    def fn(ids):
        return llama(ids, params=llama.params).last_hidden_state

    model = to_onnx(fn, [jax.ShapeDtypeStruct((2, 16), jnp.int32)])
    assert rewrites_applied(model)["rms_norm"] == 5
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("RMSNormalization") == 5
    # rotary embeddings (half-split, tables gathered by position) and GQA attention (2 kv heads)
    assert ops.count("RotaryEmbedding") == 4 and ops.count("Attention") == 2
    assert "Softmax" not in ops and "Neg" not in ops
    _check(fn, model, [_ids((2, 16), 100)], 60)
    old = to_onnx(fn, [jax.ShapeDtypeStruct((2, 16), jnp.int32)], opset=22)  # none of the three before 23
    assert not {"RMSNormalization", "RotaryEmbedding", "Attention"} & {n.op_type for n in old.graph.node}


def test_float64_keeps_the_exact_kernels():
    gelu = functools.partial(jax.nn.gelu, approximate=False)
    model = to_onnx(gelu, [("B", 16)], enable_double_precision=True)
    assert "Gelu" not in {n.op_type for n in model.graph.node} and rewrites_applied(model) == {}
    x = np.linspace(-9, 9, 4 * 16).reshape(4, 16)
    report = verify(gelu, model, [x], rtol=1e-12, atol=1e-300, enable_double_precision=True)
    assert report, report.failures()


# ---------------------------------------------------------------------------------------------
# target="onnxruntime": contrib ops where measured at least as fast, and what onnxruntime's
# transformer optimizer would still fuse afterwards


def _optimizer_changes(model, model_type):
    """Op-count changes onnxruntime.transformers.optimizer makes to ``model`` (fusions only)."""
    import collections
    import logging

    from onnxruntime.transformers.optimizer import optimize_model

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)
    before = collections.Counter(n.op_type for n in model.graph.node)
    after = collections.Counter(n.op_type for n in optimize_model(model, model_type=model_type, num_heads=4,
                                                                  hidden_size=64, opt_level=0).model.graph.node)
    return {k: after[k] - before[k] for k in before | after if after[k] != before[k]}


def _contrib_ops(model):
    return sorted({n.op_type for n in model.graph.node if n.domain == "com.microsoft"})


def test_onnxruntime_target_nnx_transformer_stack():
    from flax import nnx

    class Layer(nnx.Module):  # pre-LN: x + MHA(LN(x)), x + MLP(LN(x)), as bench/models.py
        def __init__(self, rngs):
            self.ln1, self.ln2 = nnx.LayerNorm(32, rngs=rngs), nnx.LayerNorm(32, rngs=rngs)
            self.attn = nnx.MultiHeadAttention(num_heads=4, in_features=32, decode=False, rngs=rngs)
            self.fc1, self.fc2 = nnx.Linear(32, 64, rngs=rngs), nnx.Linear(64, 32, rngs=rngs)

        def __call__(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.fc2(nnx.gelu(self.fc1(self.ln2(x))))

    layers = [Layer(nnx.Rngs(i)) for i in range(4)]

    def stack(x):
        for layer in layers:
            x = layer(x)
        return x

    model = to_onnx(stack, [("B", 16, 32)], target="onnxruntime")
    assert _contrib_ops(model) == ["FastGelu"]
    assert rewrites_applied(model)["bias_gelu"] == 4
    assert {p.key: p.value for p in model.metadata_props}["jax2onnx:target"] == "onnxruntime"
    _check(stack, model, [("B", 16, 32)], 60)
    assert _optimizer_changes(model, "bert") == {}


def test_onnxruntime_target_hf_bert_leaves_the_optimizer_nothing():
    cfg = transformers.BertConfig(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                  intermediate_size=128, max_position_embeddings=64)
    bert = transformers.FlaxBertModel(cfg, seed=0)

    def fn(ids, mask):
        return bert(ids, attention_mask=mask, params=bert.params).last_hidden_state

    model = to_onnx(fn, [jax.ShapeDtypeStruct((2, 16), jnp.int32)] * 2, target="onnxruntime")
    assert _contrib_ops(model) == ["BiasGelu"]  # residual norms stay LayerNormalization, of a Sum
    assert rewrites_applied(model)["residual_sum"] == 4  # two per layer
    mask = np.ones((2, 16), np.int32)
    mask[0, 12:] = 0
    _check(fn, model, [_ids((2, 16), 100), mask], 100)
    assert _optimizer_changes(model, "bert") == {}


def test_onnxruntime_target_pre_ln_models_leave_the_optimizer_nothing():
    # ViT and GPT-2 are pre-LN: each norm's input sum is also the next residual. The transformer
    # optimizer would fuse those into SkipLayerNormalization with its sum output, measured 4-6x
    # slower than Add + LayerNormalization on CPU (bench/ort_contrib_ops.py): the sums are Sum ops,
    # which it does not fuse.
    cfg = transformers.GPT2Config(vocab_size=100, n_embd=64, n_layer=2, n_head=4, n_positions=64)
    gpt2 = transformers.FlaxGPT2Model(cfg, seed=0)

    def fn(ids):
        return gpt2(ids, params=gpt2.params).last_hidden_state

    model = to_onnx(fn, [jax.ShapeDtypeStruct((2, 16), jnp.int32)], target="onnxruntime")
    _check(fn, model, [_ids((2, 16), 100)], 80)
    assert rewrites_applied(model)["residual_sum"] >= 4
    assert _optimizer_changes(model, "gpt2") == {}

    vit_cfg = transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=128, image_size=32, patch_size=8)
    vit = transformers.FlaxViTModel(vit_cfg, seed=0)

    def vit_fn(pixels):
        return vit(pixels, params=vit.params).last_hidden_state

    model = to_onnx(vit_fn, [jax.ShapeDtypeStruct((2, 3, 32, 32), jnp.float32)], target="onnxruntime")
    _check(vit_fn, model, [np.random.default_rng(0).standard_normal((2, 3, 32, 32)).astype(np.float32)], 100)
    assert _contrib_ops(model) == ["BiasGelu"]
    assert rewrites_applied(model)["residual_sum"] >= 4
    assert _optimizer_changes(model, "vit") == {}

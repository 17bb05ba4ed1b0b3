"""KerasHub's ALiBi attention layers (Bloom, Falcon) as one fused op (``frontends/keras_hub/alibi_attention.py``):
the probe that decides whether a layer's whole call may become the fused op picks each family's
bias convention (Bloom adds ALiBi after the scale, Falcon before it) and refuses, with the reason, a
layer whose bias is something else; a declined layer (the probe's refusal, or no fused op at the
export's opset) runs KerasHub's own call and still generates KerasHub's tokens. The fused exports
themselves are ``test_keras_hub_families.py``'s (op per layer, tokens, both targets)."""

from __future__ import annotations

import numpy as np
import pytest
from llm_test_helpers import (
    ATTENTION_OP,
    GQA_OP,
    PROMPTS,
    assert_layer_fusions,
    assert_same_tokens,
    check_folder,
    keras_hub_under_jax,
    op_counts,
)

keras, keras_hub = keras_hub_under_jax()

from jax2onnx_llm import export_causal_lm  # noqa: E402
from jax2onnx_llm.attention_report import NO_FUSED_OP  # noqa: E402
from jax2onnx_llm.frontends.keras_hub import alibi_attention as alibi  # noqa: E402
from test_keras_hub_families import keras_reference, make  # noqa: E402

VOCAB = 128
HIDDEN = 32  # the tiny backbones' (test_keras_hub_families.py)


def _attention(decoder):
    """The decoder layer's ALiBi attention layer (found as the export finds it)."""
    found = alibi.alibi_layers(decoder)
    assert len(found) == 1, found
    return found[0]


def _verdict(layer, call=None):
    plan = alibi.alibi_plan(layer)
    assert isinstance(plan, alibi.AlibiPlan), plan
    return alibi._verified(layer, call or layer.call, plan, "inputs" if plan.argument else "hidden_states",
                           HIDDEN, np.dtype("int32"), alibi.PROBE_KEYS)


@pytest.mark.parametrize(("family", "argument", "scaled"), [("bloom", False, False), ("falcon", True, True)])
def test_the_probe_finds_each_family_s_convention(family, argument, scaled):
    """Bloom's ALiBi comes from its AlibiBias sublayer and joins the scaled scores; Falcon's is the
    call's ``alibi`` argument, added before the scale (so the fused op's bias is scaled)."""
    layer = _attention(make(family).backbone.transformer_layers[0])
    plan = _verdict(layer)
    assert isinstance(plan, alibi.AlibiPlan), plan
    assert (plan.argument, plan.scaled, plan.heads, plan.head_size) == (argument, scaled, 4, 8)
    assert plan.scale == pytest.approx(1 / np.sqrt(8))


class RowAlibi(keras_hub.layers.AlibiBias):
    """An ALiBi whose slopes also grow with the query row: its bias over one row (what the export
    reads from it) is not what the layer adds to the others (a per-row constant would be: softmax
    does not see it). (A model that generates otherwise in one prefill than token by token, so for
    the probe only.)"""

    def call(self, attention_scores):
        shape = keras.ops.shape(attention_scores)
        rows = keras.ops.arange(shape[2], dtype="float32")[:, None]
        keys = keras.ops.arange(shape[3], dtype="float32")[None, :]
        return super().call(attention_scores) + 0.1 * rows * keys


def row_alibi(layer):
    """``layer``'s AlibiBias made a RowAlibi (its class swapped: a built Keras layer takes no new sublayer)."""
    layer._alibi_layer.__class__ = RowAlibi


def doubled_alibi(layer):
    """``layer``'s call (Falcon's) adding twice the ALiBi it is handed: a bias of key positions
    alone (so a model that generates consistently), which neither convention of the fused op adds."""
    call = layer.call

    def doubled(inputs, alibi, attention_mask=None, cache=None, cache_update_index=None):
        return call(inputs, alibi * 2, attention_mask=attention_mask, cache=cache, cache_update_index=cache_update_index)

    return doubled


def test_a_bias_the_plan_does_not_know_is_declined():
    """A layer adding its bias otherwise than the fused op would (Falcon's argument doubled; a
    Bloom ALiBi that depends on the query row) is refused with the reason, not exported wrong."""
    falcon = _attention(make("falcon").backbone.transformer_layers[0])
    assert "is not softmax(scale q.k + ALiBi + mask) v" in _verdict(falcon, doubled_alibi(falcon))
    bloom = _attention(make("bloom").backbone.transformer_layers[0])
    row_alibi(bloom)
    assert "is not softmax(scale q.k + ALiBi + mask) v" in _verdict(bloom)


def _export(tmp_path, model, **options):
    reference = keras_reference(model)
    seen = set(np.asarray(reference(PROMPTS)).ravel()) | set(np.asarray(reference(PROMPTS[:1])).ravel())
    eos = next(t for t in range(1, VOCAB) if t not in seen)
    folder = export_causal_lm(model, tmp_path / "m", max_length=64, eos_token_id=eos, pad_token_id=0, **options)
    check_folder(folder)
    return folder, reference, eos


@pytest.mark.parametrize("family", ["bloom", "falcon"])
def test_below_opset_23_the_layer_runs_its_own_call(tmp_path, family):
    """Standard ONNX at opset 21 has no Attention: each region lowers its body, KerasHub's own
    call, the report says why, and the tokens are KerasHub's."""
    model = make(family)
    folder, reference, eos = _export(tmp_path, model, target="onnx", opset=21, cache="concat")
    assert not {op for _, op in op_counts(folder)} & {"Attention", "GroupQueryAttention"}, op_counts(folder)
    assert_layer_fusions(folder, [NO_FUSED_OP] * 2)
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)


def test_a_layer_the_probe_refuses_runs_its_own_call(tmp_path):
    """A Falcon whose layers add twice the ALiBi they are handed: every layer declined by the probe
    (the report names the reason, no fused op in the graph), the tokens those of KerasHub's own call."""
    model = make("falcon")
    for decoder in model.backbone.transformer_layers:
        layer = _attention(decoder)
        layer.call = doubled_alibi(layer)  # (KerasHub's generate runs it too)
    folder, reference, eos = _export(tmp_path, model, target="onnxruntime", cache="shared")
    assert_layer_fusions(folder, ["is not softmax(scale q.k + ALiBi + mask) v"] * 2)
    assert not {op for _, op in op_counts(folder)} & {"Attention", "GroupQueryAttention"}, op_counts(folder)
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)


def _six_heads(family):
    """A tiny backbone with 6 heads (head size 8): ALiBi slopes for a head count that is no power of
    two, which KerasHub interleaves from two geometric sequences."""
    keras.utils.set_random_seed(0)
    M = keras_hub.models
    if family == "bloom":
        model = M.BloomCausalLM(M.BloomBackbone(vocabulary_size=VOCAB, num_layers=2, num_heads=6, hidden_dim=48,
                                                intermediate_dim=64), preprocessor=None)
    else:
        model = M.FalconCausalLM(M.FalconBackbone(vocabulary_size=VOCAB, num_layers=2, num_attention_heads=6,
                                                  hidden_dim=48, intermediate_dim=64), preprocessor=None)
    for v in model.backbone.weights:  # as make(): larger kernels, so greedy sequences vary
        if "kernel" in v.path:
            v.assign(v.numpy() * 3.0)
    model.compile(sampler="greedy")
    return model


@pytest.mark.parametrize(("family", "target"), [("bloom", "onnx"), ("falcon", "onnxruntime")])
def test_six_heads_fuse_with_the_library_s_slopes(tmp_path, family, target):
    model = _six_heads(family)
    folder, reference, eos = _export(tmp_path, model, target=target, cache="shared")
    assert_layer_fusions(folder, [GQA_OP if target == "onnxruntime" else ATTENTION_OP] * 2)
    assert_same_tokens(folder, reference, pad_token_id=0, eos=eos)

"""The probe that decides whether a KerasHub-style attention core (``_compute_attention``) may
become a fused op (``frontends/keras_hub/core_attention._verified``): it must accept a core that computes what
GroupQueryAttention / Attention compute, find the scale and a window the core applies itself, and
refuse, with the reason, a core that computes anything else. Plain JAX stand-ins for the layers.
And the export's per-layer report (``attention_report.py``) for each target, including a layer the
opset leaves unfused."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from jax2onnx_llm.frontends.keras_hub import core_attention as core

HEADS, KV_HEADS, HEAD = 4, 2, 8


class Layer:
    """A KerasHub-like attention layer: keys repeated to the query heads before the core, which
    masks, scales by ``_inv_norm_factor`` (when set) and softmaxes; ``extra`` alters the scores."""

    def __init__(self, scale=None, sliding_window=None, extra=None, soft_cap=None):
        if scale is not None:
            self._inv_norm_factor = scale
        self.num_key_value_heads = KV_HEADS
        self.sliding_window = sliding_window
        self.logit_soft_cap = soft_cap
        self.extra = extra

    def _compute_attention(self, query, key, value, attention_mask=None, start_index=0):
        scale = getattr(self, "_inv_norm_factor", 1 / np.sqrt(HEAD))
        scores = jnp.einsum("bqhd,bkhd->bhqk", query, key) * scale
        if self.logit_soft_cap:
            scores = self.logit_soft_cap * jnp.tanh(scores / self.logit_soft_cap)
        mask = attention_mask.astype(bool)
        if self.sliding_window is not None:
            q_pos = start_index + jnp.arange(query.shape[1])[:, None]
            mask = mask & (jnp.arange(key.shape[1])[None, :] >= q_pos - self.sliding_window)[None]
        if self.extra is not None:
            scores = self.extra(scores)
        scores = jnp.where(mask[:, None], scores, -1e9)
        return jnp.einsum("bhqk,bkhd->bqhd", jnp.exp(scores) / jnp.exp(scores).sum(-1, keepdims=True), value)


def verdict(layer):
    plan = core.core_plan(layer)
    assert isinstance(plan, core.CorePlan), plan
    return core._verified(layer, layer._compute_attention, plan, HEADS, KV_HEADS, HEADS // KV_HEADS, HEAD,
                          np.dtype(bool), ["start_index"], {})


def test_a_plain_core_fuses_with_its_own_scale():
    plan = verdict(Layer(scale=0.3))
    assert isinstance(plan, core.CorePlan) and plan.scale == pytest.approx(0.3) and plan.window is None


def test_a_core_without_a_scale_attribute_gets_the_one_that_agrees():
    plan = verdict(Layer())  # scales by 1/sqrt(head size) in its code only
    assert isinstance(plan, core.CorePlan) and plan.scale == pytest.approx(1 / np.sqrt(HEAD))


def test_a_window_the_core_applies_itself_is_kept():
    plan = verdict(Layer(scale=0.3, sliding_window=6))
    assert isinstance(plan, core.CorePlan) and plan.window == 6


def test_a_soft_cap_is_part_of_the_plan():
    plan = verdict(Layer(scale=0.3, soft_cap=2.0))
    assert isinstance(plan, core.CorePlan) and plan.softcap == 2.0


@pytest.mark.parametrize("extra", [
    lambda s: s + jnp.linspace(0.0, 1.0, s.shape[-1]),  # a position bias (ALiBi-like) inside the core
    lambda s: s * 1.5,  # a scale the layer names nowhere
])
def test_a_core_computing_something_else_is_refused_with_the_reason(extra):
    reason = verdict(Layer(scale=0.3, extra=extra))
    assert isinstance(reason, str) and "is not softmax(scale q.k + mask) v on a probe" in reason, reason


class FlaggedLayer(Layer):
    """``use_sliding_window_attention`` with a ``_mask_sliding_window`` (window 5) that the core
    applies (``windows=True``, Gemma 3) or leaves to the decoder block's mask (Gemma 4)."""

    def __init__(self, windows: bool):
        super().__init__(scale=0.3)
        self.use_sliding_window_attention = True
        self.windows = windows

    def _mask_sliding_window(self, attention_mask, cache_update_index=0):
        q_pos = cache_update_index + jnp.arange(attention_mask.shape[1])[:, None]
        return attention_mask.astype(bool) & (jnp.arange(attention_mask.shape[2])[None, :] > q_pos - 5)[None]

    def _compute_attention(self, query, key, value, attention_mask=None, start_index=0):
        if self.windows:
            attention_mask = self._mask_sliding_window(attention_mask, cache_update_index=start_index)
        return super()._compute_attention(query, key, value, attention_mask, start_index)


@pytest.mark.parametrize("windows", [True, False])
def test_a_window_flag_counts_only_where_the_core_applies_it(windows):
    plan = verdict(FlaggedLayer(windows))
    assert isinstance(plan, core.CorePlan) and plan.windowed is windows and plan.window is None


@pytest.mark.parametrize(("target", "opset", "expected"), [
    ("onnxruntime", 23, "com.microsoft.GroupQueryAttention"),
    ("onnx", 23, "Attention"),
    ("onnx", 21, None),  # no Attention before opset 23: the decomposed attention, and the report says so
])
def test_the_export_reports_each_layer(tmp_path, target, opset, expected):
    """The model's per-layer attention list, for a decoder written with ``attend`` (numbered by the code)."""
    from jax2onnx_llm import export_causal_lm
    from jax2onnx_llm.attention_report import NO_FUSED_OP, attention_fusions
    from llm_test_helpers import op_counts
    from test_spec import LAYERS, tiny_jax_decoder

    folder = export_causal_lm(tiny_jax_decoder(), tmp_path / "m", max_length=32, target=target, opset=opset)
    report = attention_fusions(folder)
    want = [{"layer": i, "fused": None, "reason": NO_FUSED_OP} if expected is None else {"layer": i, "fused": expected}
            for i in range(LAYERS)]
    assert report == want
    fused = {op for _, op in op_counts(folder)} & {"Attention", "GroupQueryAttention"}
    assert bool(fused) == (expected is not None), fused  # the report says what the graph holds


def test_the_probe_covers_the_export_context():
    """A window of 100 keys the core applies unannounced: beyond a 64-key probe, so a folder of
    max_length 64 (where it changes nothing) fuses, and one of 256 does not."""
    def window(scores):
        return jnp.where(jnp.arange(scores.shape[-1]) < scores.shape[-1] - 100, -1e9, scores)

    layer = Layer(scale=0.3, extra=window)
    plan = core.core_plan(layer)
    args = (layer, layer._compute_attention, plan, HEADS, KV_HEADS, HEADS // KV_HEADS, HEAD, np.dtype(bool),
            ["start_index"], {})
    assert isinstance(core._verified(*args, total=64), core.CorePlan)
    assert "is not softmax" in core._verified(*args, total=256)

"""Decoders whose layers carry state beyond attention keys and values: hybrid models (Qwen 3.5's
Gated DeltaNet layers between attention layers) and recurrent ones, exported for onnxruntime-genai.

onnxruntime-genai 0.18's decoder carries, besides each attention layer's ``past_key_values.%d.key`` /
``.value``, two fixed-size state tensors per stateful layer between steps: ``past.%d.conv`` →
``present.%d.conv`` and ``past.%d.recurrent`` → ``present.%d.recurrent`` (the names its model builder
gives Qwen 3.5 and LFM2, declared in ``genai_config.json`` as ``past_conv_names`` /
``past_recurrent_names`` and their ``present_`` twins). It starts both at zeros of the shape the graph
declares (every dim but the batch fixed) and hands each step's ``present`` back as the next ``past``;
the layers without a state simply have no such input. Paged ``state_groups`` (``fixed_conv``,
``fixed_recurrent``) belong to its paged-attention engine (CUDA), which this export does not target.

A :class:`StatefulDecoderSpec` says which layers are which; its step reads and writes the attention
layers' :class:`~jax2onnx_llm.spec.KVCache` (indexed over the attention layers only) and a
``(conv, recurrent)`` pair per stateful layer, and gets each new token's padding flag: a token of a
row's left padding must change no state (onnxruntime-genai sends an all-ones mask for a padded batch,
so the graph finds the padding itself, as :func:`jax2onnx_llm.export.flat_step` does).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp

from .errors import OptionError
from .spec import BATCH, PAST, SEQUENCE, DecoderSpec, KVCache, position_ids_from_mask

ATTENTION, STATE = "attention", "state"
#: the two state tensors of a stateful layer, in onnxruntime-genai's naming
STATE_NAMES = ("conv", "recurrent")


@dataclasses.dataclass(frozen=True, eq=False)
class StatefulDecoderSpec(DecoderSpec):
    """A :class:`DecoderSpec` some of whose layers carry fixed-size state instead of keys and values.

    Attributes:
        layer_kinds: per layer, ``"attention"`` (keys and values) or ``"state"`` (a conv and a
            recurrent state).
        state_shapes: per stateful layer (in order), the per-row shapes of its ``(conv, recurrent)``
            states (without the batch dim).
        step: ``step(params, input_ids, attention_mask, position_ids, cache, states, pad) ->
            (logits, cache, states)``: ``cache`` the attention layers' ``KVCache``, ``states`` a list
            of ``(conv, recurrent)`` pairs, ``pad`` ``(batch, sequence)`` bool: the tokens of a row's
            left padding, which must change no state.
    """

    layer_kinds: tuple[str, ...] = ()
    state_shapes: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()

    @property
    def attention_layers(self) -> list[int]:
        return [i for i, kind in enumerate(self.layer_kinds) if kind == ATTENTION]

    @property
    def state_layers(self) -> list[int]:
        return [i for i, kind in enumerate(self.layer_kinds) if kind == STATE]


def io_names(spec: StatefulDecoderSpec) -> tuple[list[str], list[str]]:
    inputs, outputs = ["input_ids", "attention_mask"], ["logits"]
    for i, kind in enumerate(spec.layer_kinds):
        if kind == ATTENTION:
            inputs += [f"past_key_values.{i}.key", f"past_key_values.{i}.value"]
            outputs += [f"present.{i}.key", f"present.{i}.value"]
        else:
            inputs += [f"past.{i}.{name}" for name in STATE_NAMES]
            outputs += [f"present.{i}.{name}" for name in STATE_NAMES]
    return inputs, outputs


def input_specs(spec: StatefulDecoderSpec, max_length: int) -> list[Any]:
    """Symbolic batch, sequence and past lengths (``past + sequence <= max_length``); the states'
    other dims fixed, as onnxruntime-genai allocates them from the graph's declared shapes."""
    batch, seq, past = jax.export.symbolic_shape(
        f"{BATCH}, {SEQUENCE}, {PAST}", constraints=(f"{PAST} + {SEQUENCE} <= {max_length}",))
    specs = [jax.ShapeDtypeStruct((batch, seq), jnp.int32), jax.ShapeDtypeStruct((batch, past + seq), jnp.int32)]
    kv = jax.ShapeDtypeStruct((batch, spec.num_kv_heads, past, spec.head_size), spec.dtype)
    shapes = iter(spec.state_shapes)
    for kind in spec.layer_kinds:
        if kind == ATTENTION:
            specs += [kv, kv]
        else:
            specs += [jax.ShapeDtypeStruct((batch, *shape), jnp.float32) for shape in next(shapes)]
    return specs


def flat_step(spec: StatefulDecoderSpec, max_length: int) -> Any:
    """The step as onnxruntime-genai calls it: ``(input_ids, attention_mask, *past) -> (logits, *present)``,
    past/present per layer in :func:`io_names`' order (the concat cache layout).

    Padding, as in :func:`jax2onnx_llm.export.flat_step`: at prefill the pad tokens before a row's first
    real token; later, the padding slots the first attention layer's keys mark with NaN. A model
    without attention layers needs no marker: its padding can only be a prompt's, seen at prefill."""
    pad_id = spec.pad_token_id
    if pad_id is None:
        raise OptionError("a stateful decoder's step needs the spec's pad_token_id: give the DecoderSpec one")
    attention = spec.attention_layers

    def run(input_ids: Any, attention_mask: Any, *flat: Any) -> tuple[Any, ...]:
        seq, total = input_ids.shape[1], attention_mask.shape[1]
        mask = attention_mask.astype(jnp.int32)
        keys, values, states = [], [], []
        at = 0
        for kind in spec.layer_kinds:
            pair = flat[at], flat[at + 1]
            at += 2
            if kind == ATTENTION:
                keys.append(pair[0])
                values.append(pair[1])
            else:
                states.append(pair)
        is_pad = input_ids == pad_id
        if attention:
            past_pad = jnp.isnan(keys[0][:, 0, :, 0])  # (batch, past)
            seen_real = jnp.any(~past_pad & (mask[:, : total - seq] > 0), axis=1, keepdims=True)
        else:
            past_pad = jnp.zeros((input_ids.shape[0], total - seq), bool)
            # the past's length as a value: a symbolic dim is assumed >= 1, so `past > 0` on dims is always True
            past_length = jnp.asarray(total - seq, jnp.int32)
            seen_real = jnp.broadcast_to(past_length > 0, (input_ids.shape[0], 1))
        leading_pad = (jnp.cumsum(~is_pad, axis=1) == 0) & ~seen_real
        pad_slots = jnp.concatenate([past_pad, leading_pad], axis=1)
        mask = jnp.where(pad_slots, 0, mask)
        if attention:
            keys[0] = jnp.where(past_pad[:, None, :, None], jnp.zeros((), keys[0].dtype), keys[0])  # marked slots
        position_ids = position_ids_from_mask(mask, seq)
        kv = KVCache(keys, values, mask, "concat", max_length=max_length)
        logits, kv, states = spec.step(spec.params, input_ids, mask, position_ids, kv, list(states), leading_pad)
        keys = list(kv.keys)
        if attention:
            keys[0] = jnp.where(pad_slots[:, None, :, None], jnp.asarray(jnp.nan, keys[0].dtype), keys[0])
        present: list[Any] = []
        kv_at, state_at = iter(range(len(keys))), iter(states)
        for kind in spec.layer_kinds:
            if kind == ATTENTION:
                j = next(kv_at)
                present += [keys[j], kv.values[j]]
            else:
                present += [s.astype(jnp.float32) for s in next(state_at)]
        return (logits.astype(spec.dtype), *present)

    return run


def genai_decoder_names(spec: StatefulDecoderSpec) -> tuple[dict[str, str], dict[str, str]]:
    """``genai_config.json``'s ``model.decoder.inputs`` / ``outputs`` name patterns for this spec."""
    inputs = {"input_ids": "input_ids", "attention_mask": "attention_mask"}
    outputs = {"logits": "logits"}
    if spec.attention_layers:
        inputs.update(past_key_names="past_key_values.%d.key", past_value_names="past_key_values.%d.value")
        outputs.update(present_key_names="present.%d.key", present_value_names="present.%d.value")
    if spec.state_layers:
        for name in STATE_NAMES:
            inputs[f"past_{name}_names"] = f"past.%d.{name}"
            outputs[f"present_{name}_names"] = f"present.%d.{name}"
    return inputs, outputs

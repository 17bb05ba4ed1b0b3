"""Any KerasHub decoder-only ``CausalLM`` under the JAX backend, through the protocol the families
share rather than per-family code.

What a family needs to export here (KerasHub's own contract for ``generate``):

- ``call_with_cache(token_ids, cache, cache_update_index) -> (logits, hidden_states, cache)``;
- ``_build_cache(token_ids, ...)`` building the cache it reads: one array
  ``(batch, layers, 2, length, kv_heads, head_size)`` (most families) or a tuple of per-layer
  ``(key, value)`` pairs, each ``(batch, length, kv_heads, head_size)`` (Gemma 3); or a tuple whose
  first entry is that one array and whose others hold state for layers that are no attention layers
  (Qwen 3.5's convolution and recurrent state): a model all of whose layers are attention layers
  exports (the state is zeros that no layer reads), one with other layers is refused, naming them;
- ``backbone.transformer_layers``, each taking a ``decoder_attention_mask`` (ANDed by the layer
  with its own causal / sliding-window mask) or computing its mask in ``_compute_attention_mask``.

The step is the model's own ``call_with_cache``; the adapter adds only what that call cannot
express for a left-padded batch: the padding mask (handed to each layer as above, for this call
only) and, for learned position tables (``PositionEmbedding``: GPT-2, OPT), each row's positions
counted over its real tokens. Rotary and ALiBi models need nothing: KerasHub positions a step at
``cache_update_index + i`` in every row, and their scores depend only on position differences
(a shared offset per row changes nothing). Phi-3's long-rope picks its factors from the last
absolute position, which for a padded row includes its padding (see the guide).

The cache moves in and out of KerasHub's form as in ``keras_hub.py``: the shared buffer is the
cache (``cache_update_index = past``); the concat layout gets room for the step's tokens.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

import jax.numpy as jnp
import numpy as np

from ...attention_report import decline, register
from ...errors import UnsupportedModelError
from ...spec import DecoderSpec, KVCache
from .alibi_attention import alibi_attention, alibi_layers
from .core_attention import core_attention, core_layers, no_core_reason


class _CacheProbe(Exception):
    """Raised by the stand-in ``call_with_cache`` to hand back the cache ``_build_cache`` made."""

    def __init__(self, cache: Any):
        super().__init__("cache probe")
        self.cache = cache


def decoder_spec(model: Any, name: str) -> DecoderSpec:
    backbone = getattr(model, "backbone", None)
    decoders = list(getattr(backbone, "transformer_layers", None) or [])
    if not (callable(getattr(model, "call_with_cache", None)) and callable(getattr(model, "_build_cache", None))
            and decoders):
        raise UnsupportedModelError(
            f"KerasHub's {name} is not a supported causal LM: it lacks call_with_cache, _build_cache or "
            "backbone.transformer_layers, the cached-generation protocol KerasHub's decoder-only CausalLMs "
            "(GPT2CausalLM, GemmaCausalLM, LlamaCausalLM, MistralCausalLM, ...) follow; wrap the decoder in a "
            "jax2onnx_llm.DecoderSpec"
        )
    layout, kv_heads, head_size, unused_state = _cache_layout(model, name, decoders)
    masking = [_mask_hook(layer, name) for layer in decoders]
    from keras_hub.layers import PositionEmbedding  # the learned position tables (GPT-2, OPT)

    tables = [layer for layer in backbone._flatten_layers(include_self=False, recursive=True)
              if isinstance(layer, PositionEmbedding)]
    rotaries = row_rotaries(backbone)
    heads = next((int(getattr(backbone, a)) for a in ("num_query_heads", "num_heads", "num_attention_heads")
                  if isinstance(getattr(backbone, a, None), int)), kv_heads)
    num_layers = len(decoders)

    def step(params: Any, input_ids: Any, attention_mask: Any, position_ids: Any, cache: KVCache) -> Any:
        batch, seq = input_ids.shape
        past = jnp.asarray(cache.past_length(seq), jnp.int32)
        visible = cache.key_valid(seq)[:, 0]  # (batch, sequence, capacity): padding and causality
        pairs = []
        for i in range(num_layers):
            k, v = cache.keys[i].transpose(0, 2, 1, 3), cache.values[i].transpose(0, 2, 1, 3)
            if cache.layout == "concat":
                room = jnp.zeros((batch, seq, kv_heads, head_size), k.dtype)
                k, v = jnp.concatenate([k, room], axis=1), jnp.concatenate([v, room], axis=1)
            pairs.append((k, v))
        if layout == "stacked":
            library_cache: Any = jnp.stack([jnp.stack(p, axis=1) for p in pairs], axis=1)
            if unused_state:  # no attention layer reads or writes it: zeros in, dropped after
                library_cache = (library_cache, *(jnp.zeros((batch, *shape), dtype) for shape, dtype in unused_state))
        else:
            library_cache = tuple(pairs)
        with contextlib.ExitStack() as stack:
            for layer, hook in zip(decoders, masking):
                stack.enter_context(hook(layer, visible))
            stack.enter_context(attention_cores(decoders, past, cache.max_length))
            for table in tables:
                stack.enter_context(_positions(table, position_ids))
            first_real = jnp.argmax(attention_mask > 0, axis=1).astype(jnp.int32)  # each row's left padding
            for rotary in rotaries:
                stack.enter_context(row_rotary(rotary, first_real))
            logits, _, library_cache = model.call_with_cache(input_ids, library_cache, past)
        if unused_state:
            library_cache = library_cache[0]
        for i in range(num_layers):
            if layout == "stacked":
                k, v = library_cache[:, i, 0], library_cache[:, i, 1]
            else:
                k, v = library_cache[i]
            cache.keys[i], cache.values[i] = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
        return logits, cache

    facts = library_facts(model)
    if facts["pad_token_id"] is None:
        facts["pad_token_id"] = 0
    return DecoderSpec(
        step=step, params=None, num_layers=num_layers, num_heads=heads, num_kv_heads=kv_heads, head_size=head_size,
        hidden_size=int(backbone.hidden_dim), vocab_size=int(backbone.vocabulary_size),
        max_positions=min((int(t.sequence_length) for t in tables), default=None),
        model_type="decoder", family=f"KerasHub {name}", **facts,
    )


@contextlib.contextmanager
def attention_cores(decoders: list[Any], past: Any, context: int | None) -> Iterator[None]:
    """For this call, each decoder layer's softmax core (``_compute_attention``) as the export
    target's fused op (``core_attention.py``; ``context``: the export's ``max_length``), or,
    in a layer without one, its ALiBi attention layer's whole call (``alibi_attention.py``),
    and the layers noted for the export's report."""
    register(decoders)
    with contextlib.ExitStack() as stack:
        for i, decoder in enumerate(decoders):
            cores = core_layers(decoder)
            # no softmax core: an ALiBi layer's whole call (alibi_attention.py)
            alibi = [] if cores else alibi_layers(decoder)
            if not cores and not alibi:
                decline(i, no_core_reason(decoder))
            for core in cores:
                stack.enter_context(override_attribute(core, "_compute_attention", core_attention(
                    core, core._compute_attention, past, context)))
            for layer in alibi:
                stack.enter_context(override_attribute(layer, "call", alibi_attention(
                    layer, layer.call, context)))
        yield


def library_facts(model: Any) -> dict[str, Any]:
    """The ``DecoderSpec`` fields a KerasHub ``CausalLM`` names itself: its preprocessor's tokenizer
    (written beside the model) and special ids, whether that preprocessor puts the start token first,
    and the dtype its cache and logits are computed in (genai wants one type for both)."""
    preprocessor = getattr(model, "preprocessor", None)
    tokenizer = getattr(preprocessor, "tokenizer", None)

    def token_id(attr: str) -> int | None:
        value = getattr(tokenizer, attr, None) if tokenizer is not None else None
        return int(value) if value is not None else None

    return dict(bos_token_id=token_id("start_token_id"), eos_token_id=token_id("end_token_id"),
                pad_token_id=token_id("pad_token_id"), tokenizer=tokenizer, dtype=jnp.dtype(model.compute_dtype),
                prompts_start_with_bos=bool(getattr(preprocessor, "add_start_token", False)))


def _cache_layout(model: Any, name: str, decoders: list[Any]) -> tuple[str, int, int, list[tuple[Any, Any]]]:
    """``("stacked" | "pairs", kv_heads, head_size, unused_state)`` of the cache ``_build_cache`` makes,
    read from the cache it hands to ``call_with_cache`` (stood in for, so nothing is computed);
    ``unused_state``: the (per-row shape, dtype) of the state beside the keys and values that a model of
    attention layers only carries unread."""
    ids = np.zeros((1, 3), np.int32)
    arguments: dict[str, Any] = {}
    for param in list(inspect.signature(model._build_cache).parameters.values())[1:]:
        if param.default is inspect.Parameter.empty:
            arguments[param.name] = np.ones((1, 3), np.int32) if param.name == "padding_mask" else None

    def stand_in(token_ids: Any = None, cache: Any = None, *args: Any, **kwargs: Any) -> Any:
        raise _CacheProbe(cache)

    cache = None
    with override_attribute(model, "call_with_cache", stand_in):
        try:
            model._build_cache(ids, **arguments)
        except _CacheProbe as probe:
            cache = probe.cache
        except Exception:  # noqa: BLE001 - a _build_cache wanting more (images): refused below, by its cache
            cache = None
    layer_types = [str(t) for t in getattr(model.backbone, "layer_types", None) or []]  # Qwen 3.5's kinds
    only_attention = all("attention" in t and "linear" not in t for t in layer_types)
    state: list[tuple[Any, Any]] = []
    if isinstance(cache, tuple) and cache and len(getattr(cache[0], "shape", ())) == 6 and only_attention:
        state = [(tuple(int(d) for d in s.shape[1:]), s.dtype) for s in cache[1:]]
        cache = cache[0]
    shape = tuple(getattr(cache, "shape", ()))
    if len(shape) == 6 and shape[1] == len(decoders) and shape[2] == 2 and shape[3] == 3:
        return "stacked", int(shape[4]), int(shape[5]), state
    if (isinstance(cache, tuple) and len(cache) == len(decoders)
            and all(isinstance(p, tuple) and len(p) == 2 for p in cache)):
        k_shape = tuple(getattr(cache[0][0], "shape", ()))
        if len(k_shape) == 4 and k_shape[1] == 3:
            return "pairs", int(k_shape[2]), int(k_shape[3]), []
    kinds = ", ".join(sorted({type(layer).__name__ for layer in decoders}))
    if layer_types:
        kinds += f" of types {', '.join(sorted(set(layer_types)))}"
    raise UnsupportedModelError(
        f"KerasHub {name} is not supported: its decoder layers ({kinds}) keep a cache that is not only "
        "attention keys and values (recurrent or convolution state, or inputs beyond token ids); only attention "
        "layers export"
    )


def _mask_hook(layer: Any, name: str) -> Any:
    """How this decoder layer takes the padding mask: a context manager factory ``(layer, mask)``."""
    if "decoder_attention_mask" in inspect.signature(layer.call).parameters:
        return decoder_attention_mask_for
    if callable(getattr(layer, "_compute_attention_mask", None)):
        return _and_computed_mask
    raise UnsupportedModelError(
        f"KerasHub {name} is not supported: its decoder layer {type(layer).__name__} takes no "
        "decoder_attention_mask and has no _compute_attention_mask, so a padded batch cannot be masked"
    )


@contextlib.contextmanager
def override_attribute(obj: Any, name: str, value: Any) -> Iterator[None]:
    """``obj.name = value`` for the block (an instance attribute over the class's method), then
    exactly what was there before: the export leaves the model as it found it."""
    missing = object()
    before = obj.__dict__.get(name, missing)
    setattr(obj, name, value)
    try:
        yield
    finally:
        if before is missing:
            delattr(obj, name)
        else:
            setattr(obj, name, before)


def decoder_attention_mask_for(layer: Any, mask: Any) -> Any:
    """The layer's call with ``decoder_attention_mask=mask`` (the layer ANDs it with its causal
    and sliding-window mask)."""
    call = layer.call
    return override_attribute(layer, "call", lambda *args, **kwargs: call(*args, **{**kwargs, "decoder_attention_mask": mask}))


def _and_computed_mask(layer: Any, mask: Any) -> Any:
    """The layer's own mask (causality, bidirectional spans) ANDed with ``mask``."""
    compute = layer._compute_attention_mask

    def masked(*args: Any, **kwargs: Any) -> Any:
        own = compute(*args, **kwargs)
        return jnp.logical_and(jnp.asarray(own).astype(bool), mask).astype(jnp.asarray(own).dtype)

    return override_attribute(layer, "_compute_attention_mask", masked)


def row_rotaries(backbone: Any) -> list[Any]:
    """The backbone's rotary layers that take per-row positions (KerasHub's ``RotaryEmbedding`` and the
    subclasses that keep its cos/sin code; Phi-3's long-rope computes them for one row of positions)."""
    from keras_hub.layers import RotaryEmbedding

    base = RotaryEmbedding._compute_cos_sin_embedding
    return [layer for layer in backbone._flatten_layers(include_self=False, recursive=True)
            if isinstance(layer, RotaryEmbedding) and type(layer)._compute_cos_sin_embedding is base]


def row_rotary(layer: Any, first_real: Any) -> Any:
    """A rotary layer rotating each row as that row alone would be: a position ``p`` the library uses
    (``start_index + i``, a slot of the cache buffer) at or after the row's first real token is taken
    as ``p - first_real``. Most families rotate queries and keys at their own slots, where only the
    differences matter; GPT-NeoX rotates the whole cache buffer by slot and a decode step's query at 0,
    so its scores would depend on how much left padding a row has."""
    call = layer.call

    def shifted(inputs: Any, start_index: Any = 0, positions: Any = None) -> Any:
        if positions is not None:
            return call(inputs, positions=positions)
        seq = inputs.shape[layer.sequence_axis]
        slots = jnp.arange(seq, dtype=jnp.int32)[None, :] + jnp.asarray(start_index, jnp.int32)
        first = first_real[:, None]
        return call(inputs, positions=jnp.where(slots >= first, slots - first, slots))

    return override_attribute(layer, "call", shifted)


def _positions(table: Any, position_ids: Any) -> Any:
    """A learned position table read at each row's own positions (KerasHub's ``positions=``), not
    at ``cache_update_index + i``, which a left-padded row does not start from."""
    call = table.call
    return override_attribute(table, "call", lambda inputs, start_index=0, positions=None: call(inputs, positions=position_ids))

"""Hugging Face transformers Flax causal LMs (transformers 4.x): GPT-2, Llama, Mistral, Gemma, and
GPT-Neo, GPT-J, OPT, Bloom, XGLM (``more_families.py``).

The step runs the library's own Flax module (``model.module.apply``) with its own static cache:
each attention layer keeps ``cached_key``/``cached_value`` ``(batch, length, kv_heads, head_size)``
and a ``cache_index``, writes the step's keys there with ``dynamic_update_slice`` and masks the
slots past ``cache_index + sequence``. The adapter only moves onnxruntime-genai's cache in and
out of that form:

- ``cache="shared"``: the genai buffer *is* HF's cache (transposed), ``cache_index = past``;
- ``cache="concat"``: HF's cache is the past plus room for this step's tokens, so HF's write
  produces exactly the concatenation.

All the math (embeddings, norms, rotary, GQA, MLP, tied heads) is transformers' code.
"""

from __future__ import annotations

import re
from typing import Any

import jax
import jax.numpy as jnp

from ...errors import UnsupportedModelError
from ...spec import DecoderSpec, KVCache, extend_to
from ..support import supported_family
from .more_families import FAMILIES as MORE_FAMILIES
from .more_families import takes_position_ids

#: class name -> genai_config.json model.type
FAMILIES = {
    # genai's "gpt2" type expects a combined past_%d cache; this export has the common per-layer
    # key/value layout, which genai runs as a plain decoder.
    "FlaxGPT2LMHeadModel": "decoder",
    "FlaxLlamaForCausalLM": "llama",
    "FlaxMistralForCausalLM": "mistral",
    "FlaxGemmaForCausalLM": "gemma",
    **MORE_FAMILIES,
}


def decoder_spec(model: Any) -> DecoderSpec:
    name, family = supported_family(model, FAMILIES, "transformers' (4.x Flax)")
    config = model.config
    if name == "FlaxGPT2LMHeadModel":
        layers, heads, hidden, positions = config.n_layer, config.n_head, config.n_embd, config.n_positions
        kv_heads, head_size = heads, hidden // heads
    else:
        layers, heads, hidden = config.num_hidden_layers, config.num_attention_heads, config.hidden_size
        positions = getattr(config, "max_position_embeddings", None)  # None: ALiBi (Bloom), no table
        kv_heads = getattr(config, "num_key_value_heads", None) or heads
        head_size = getattr(config, "head_dim", None) or hidden // heads
    module = model.module
    template = _cache_template(model)
    takes_positions = takes_position_ids(module)  # Bloom's call has none (ALiBi from the mask)

    def step(params: Any, input_ids: Any, attention_mask: Any, position_ids: Any, cache: KVCache) -> Any:
        batch, seq = input_ids.shape
        past = jnp.asarray(cache.past_length(seq), jnp.int32)
        layers_kv = []
        for k, v in zip(cache.keys, cache.values):
            k, v = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)  # genai (b, h, t, d) -> HF (b, t, h, d)
            if cache.layout == "concat":
                room = jnp.zeros((batch, seq, kv_heads, head_size), k.dtype)
                k, v = jnp.concatenate([k, room], axis=1), jnp.concatenate([v, room], axis=1)
            layers_kv.append((k, v))
        hf_cache = _fill(template, layers_kv, past)
        # HF's mask spans its cache: the tokens so far, then (shared buffer) slots it masks itself.
        mask = attention_mask if cache.layout == "concat" else extend_to(attention_mask > 0, cache.capacity)
        positions_arg = {"position_ids": position_ids} if takes_positions else {}
        out, mutated = module.apply(
            {"params": params, "cache": hf_cache}, input_ids=input_ids, attention_mask=mask.astype(jnp.int32),
            **positions_arg, deterministic=True, init_cache=False, return_dict=True, mutable=["cache"],
        )
        for i, (k, v) in enumerate(_read(mutated["cache"], layers)):
            cache.keys[i], cache.values[i] = k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3)
        return out.logits, cache

    gen = getattr(model, "generation_config", None)
    eos = _first_set(getattr(gen, "eos_token_id", None), config.eos_token_id)
    pad = _first_set(getattr(gen, "pad_token_id", None), config.pad_token_id)
    bos = _first_set(getattr(gen, "bos_token_id", None), config.bos_token_id)
    return DecoderSpec(
        step=step, params=_params(model), num_layers=layers, num_heads=heads, num_kv_heads=kv_heads,
        head_size=head_size, hidden_size=hidden, vocab_size=config.vocab_size, max_positions=positions,
        bos_token_id=bos, eos_token_id=eos, pad_token_id=pad, model_type=family, family=f"transformers {name}",
        # the computation dtype (``from_pretrained(..., dtype=jnp.bfloat16)``): its cache, and logits alike
        dtype=jnp.dtype(getattr(model, "dtype", jnp.float32)),
    )


def _params(model: Any) -> Any:
    """The model's weights; for a model built with ``_do_init=False`` (no arrays: its weights come
    from ``export_causal_lm(..., weights=...)``), their shapes only."""
    if getattr(model, "_is_initialized", True):
        return model.params
    return jax.eval_shape(lambda: model.init_weights(jax.random.PRNGKey(0), (1, 1)))


def _first_set(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


_LAYER = re.compile(r"^\d+$")


def _layer_of(path: tuple[Any, ...]) -> int:
    for key in path:
        name = str(getattr(key, "key", key))
        if _LAYER.match(name):
            return int(name)
    raise UnsupportedModelError(f"cannot tell the layer of the cache entry {jax.tree_util.keystr(path)}")


def _cache_template(model: Any) -> Any:
    """The structure of the model's cache collection (shapes only: nothing is allocated).

    Remembered per model class, module class, config and dtype, which are all it depends on:
    ``init_cache`` traces the whole model once more (its ``init``), about half as long as the
    export's own trace of the step, and exporting one model again (another target, cache layout or
    opset) or a model of the same config asks for the same structure."""
    try:
        key = (type(model), type(model.module), model.config.to_json_string(), str(getattr(model, "dtype", None)))
    except (TypeError, ValueError):  # a config value JSON cannot write: not remembered
        key = None
    template = _CACHE_TEMPLATES.get(key)
    if template is None:
        template = jax.eval_shape(lambda: model.init_cache(1, 2))
        if key is None:
            return template
        if len(_CACHE_TEMPLATES) >= _CACHE_TEMPLATES_KEPT:
            _CACHE_TEMPLATES.pop(next(iter(_CACHE_TEMPLATES)))
        _CACHE_TEMPLATES[key] = template
    return template


#: cache structures (pytrees of ``jax.ShapeDtypeStruct``: immutable, safe to share), oldest first
_CACHE_TEMPLATES: dict[tuple[Any, ...], Any] = {}
_CACHE_TEMPLATES_KEPT = 32


def _fill(template: Any, layers_kv: list[tuple[Any, Any]], index: Any) -> Any:
    def leaf(path: tuple[Any, ...], _: Any) -> Any:
        field = str(getattr(path[-1], "key", path[-1]))
        k, v = layers_kv[_layer_of(path)]
        return {"cached_key": k, "cached_value": v, "cache_index": index}[field]

    return jax.tree_util.tree_map_with_path(leaf, template)


def _read(cache: Any, num_layers: int) -> list[tuple[Any, Any]]:
    found: dict[int, dict[str, Any]] = {}
    for path, value in jax.tree_util.tree_flatten_with_path(cache)[0]:
        field = str(getattr(path[-1], "key", path[-1]))
        found.setdefault(_layer_of(path), {})[field] = value
    return [(found[i]["cached_key"], found[i]["cached_value"]) for i in range(num_layers)]

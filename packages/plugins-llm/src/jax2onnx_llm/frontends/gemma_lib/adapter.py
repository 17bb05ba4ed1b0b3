"""A ``gemma`` library (google-deepmind/gemma) Linen ``Transformer`` with its ``params`` as a DecoderSpec.

The step runs the library's own modules, bound to the given params: ``Embedder.encode``, each
block's norms, its attention's projections (``qkv_einsum`` or ``q_einsum``/``kv_einsum``), query/key
norms, the library's ``apply_rope`` at the positions counted over the real tokens (as the library
counts them), ``attn_vec_einsum``, the feed-forward and the final norm, ``Embedder.decode`` and the
final soft cap. Only the glue of ``Attention.__call__`` that writes its own (left-aligned, per-row
positions) cache and its softmax are replaced: the cache is the export's, the softmax
:func:`.attention.attend_gemma` (the fused op). What it reads of each layer is checked to be the
library's ``Attention`` of the version it was written against; another kind (a LoRA or quantized
wrapper) is refused, not exported wrong. Gemma 3n's transformer (AltUp, LAuReL, per-layer inputs,
KV sharing) is stepped by ``gemma3n.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from ...errors import UnsupportedModelError
from ...spec import DecoderSpec, KVCache
from .attention import attend_gemma

#: the gemma library's special tokens (its Gemma 2/3/3n tokenizers: pad 0, eos 1, bos 2)
PAD, EOS, BOS = 0, 1, 2
#: ``<end_of_turn>`` per tokenizer version (``model.INFO.tokenizer_version``): the library's sampler
#: stops at it as at ``EOS``
END_OF_TURN = {2: 107, 3: 106, "3n": 106}


def transformer_class() -> type | None:
    """The library's ``Transformer`` base class, when the library is imported (a model of it exists only then)."""
    module = sys.modules.get("gemma.gm.nn._transformer")
    return getattr(module, "Transformer", None)


def gemma3n_class() -> type | None:
    """The library's Gemma 3n transformer class (a ``Transformer`` too, stepped by ``gemma3n.py``), when imported."""
    module = sys.modules.get("gemma.gm.nn.gemma3n._transformer")
    return getattr(module, "Gemma3nTransformer", None)


def gemma4_class() -> type | None:
    """Gemma 4's transformer class (``gemma`` >= 4, Python >= 3.12; not a 3.x ``Transformer``), when
    imported: claimed only to be refused by name."""
    module = sys.modules.get("gemma.gm.nn.gemma4._transformer")
    return getattr(module, "Transformer", None)


def decoder_spec(model: Any, params: Any = None) -> DecoderSpec:
    name = type(model).__name__
    gemma4 = gemma4_class()
    if gemma4 is not None and isinstance(model, gemma4):
        raise UnsupportedModelError(
            f"the gemma library's {name} (Gemma 4) is not exported: this front-end was written and tested "
            "against gemma 3.3.0 (Gemma 2, 3, 3n), and gemma 4.x needs Python >= 3.12, where it has not run; export "
            "KerasHub's keras_hub.models.Gemma4CausalLM, or write its step as a jax2onnx_llm.DecoderSpec")
    from gemma.gm.nn import _modules

    params = float_params(model, params)
    config = model.config
    module = model.bind({"params": params})
    for i, block in enumerate(module.blocks):
        if type(block) is not _modules.Block or type(block.attn) is not _modules.Attention:
            raise UnsupportedModelError(
                f"{name}'s layer {i} is {type(block).__name__} with {type(getattr(block, 'attn', None)).__name__}, "
                "not the library's Block/Attention this front-end reads (Gemma 2 and 3 text models): export another "
                "gemma model, or write its step as a jax2onnx_llm.DecoderSpec")
    return DecoderSpec(
        step=_step(model), params=params, num_layers=config.num_layers, num_heads=config.num_heads,
        num_kv_heads=config.num_kv_heads, head_size=config.head_dim, hidden_size=config.embed_dim,
        vocab_size=config.num_embed, bos_token_id=BOS, eos_token_id=end_tokens(model), pad_token_id=PAD,
        model_type="gemma2" if config.attn_logits_soft_cap else "gemma3_text", family=f"gemma library {name}",
        prompts_start_with_bos=True,
    )


def float_params(model: Any, params: Any) -> Any:
    """The model's params (``model.init``'s ``{"params": ...}`` or what it holds) as float32, checked
    for a text-only model: what every gemma library transformer's step is bound to."""
    name = type(model).__name__
    if params is None:
        raise UnsupportedModelError(
            f"the gemma library's {name} is a Linen module and holds no weights: pass them, "
            "export_causal_lm(model, folder, params=params, ...)")
    if isinstance(params, Mapping) and set(params) == {"params"}:  # model.init's {"params": ...}
        params = params["params"]
    if model.config.vision_encoder is not None:
        raise UnsupportedModelError(f"{name} has a vision encoder: build it with text_only=True (this front-end "
                                    "exports the text decoder)")
    return jax.tree_util.tree_map(
        lambda a: jnp.asarray(a, jnp.float32) if jnp.issubdtype(jnp.asarray(a).dtype, jnp.floating) else a, params)


def end_tokens(model: Any) -> int | list[int]:
    """Where the library's sampler stops: ``EOS`` and the model's tokenizer's ``<end_of_turn>`` (a model
    naming no tokenizer version, ``gm.nn.Transformer(config=...)``: ``EOS``; pass ``eos_token_id=``)."""
    version = getattr(getattr(model, "INFO", None), "tokenizer_version", None)
    return [EOS, END_OF_TURN[version]] if version in END_OF_TURN else EOS


def _step(model: Any) -> Any:
    from gemma.gm.math import _positional_embeddings
    from gemma.gm.nn import _modules

    def step(params: Any, input_ids: Any, attention_mask: Any, position_ids: Any, cache: KVCache) -> Any:
        module = model.bind({"params": params})
        config = module.config
        x = module.embedder.encode(input_ids)
        for i, block in enumerate(module.blocks):
            attn = block.attn
            h = block.pre_attention_norm(x)
            if attn.use_qkv_einsum:
                q, k, v = attn.qkv_einsum("BTD,SNDH->SBTNH", h)
            else:
                q = attn.q_einsum("BTD,NDH->BTNH", h)
                k, v = attn.kv_einsum("BSD,CKDH->CBSKH", h)
            if attn.use_qk_norm:
                q, k = attn._query_norm(q), attn._key_norm(k)
            rope = dict(base_frequency=attn.rope_base_frequency, scale_factor=attn.rope_scale_factor)
            q = _positional_embeddings.apply_rope(q, position_ids, **rope)
            k = _positional_embeddings.apply_rope(k, position_ids, **rope)
            window = attn.sliding_window_size if attn.attn_type == _modules.AttentionType.LOCAL_SLIDING else None
            encoded = attend_gemma(cache, i, q, k, v, scale=float(attn.query_pre_attn_scalar),
                                   softcap=attn.attn_logits_soft_cap, window=window)
            out = attn.attn_vec_einsum("BTNH,NHD->BTD", encoded)
            if block.post_attention_norm is not None:
                out = block.post_attention_norm(out)
            x = x + out
            out = block.mlp(block.pre_ffw_norm(x))
            if block.post_ffw_norm is not None:
                out = block.post_ffw_norm(out)
            x = x + out
        logits = module.embedder.decode(module.final_norm(x))
        if config.final_logit_softcap is not None:
            logits = jnp.tanh(logits / config.final_logit_softcap) * config.final_logit_softcap
        return logits, cache

    return step


"""The ``gemma`` library's Gemma 3n text transformer (``gm.nn.Gemma3n_E2B`` / ``Gemma3n_E4B`` with
``text_only=True``, or any ``Gemma3nTransformer`` config) with its ``params`` as a DecoderSpec.

The step runs the library's own code, bound to the given params: the transformer's embedding,
per-layer inputs (``Embedder.encode_per_layer_input``), AltUp's stream projections before and after
the blocks (``_maybe_preprocess_embeddings_with_altup`` / ``_maybe_postprocess_...``), the final norm,
``Embedder.decode`` and the final soft cap, and each ``Block.__call__`` as it is (AltUp's predict and
correct, LAuReL, the activation-sparse feed-forward, the per-layer input mapping, every norm).
Only the blocks' ``Attention.__call__`` is replaced for the call (``flax.linen.intercept_methods``),
since it writes its own left-aligned cache and runs its own softmax: the replacement projects with the
layer's own ``q_einsum`` / ``kv_einsum`` (or ``qkv_einsum``), its query / key / value norms and the
library's ``apply_rope``, attends over the export's cache with :func:`.attention.attend_gemma` (the
fused op; the library's ``reduce_precision`` before the softmax is the identity in float32, the
dtype the step computes in) and projects back with ``attn_vec_einsum``.

KV sharing: a layer the config's ``kv_cache_sharing_config`` points at an earlier one computes only
its queries and attends over that layer's keys and values (its past and this step's), as the library
does; it has no cache of its own in the folder (``support.only_holders``).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ...errors import UnsupportedModelError
from ...spec import DecoderSpec, KVCache
from ..support import only_holders
from .adapter import BOS, PAD, end_tokens, float_params
from .attention import attend_gemma


def decoder_spec(model: Any, params: Any = None) -> DecoderSpec:
    from gemma.gm.nn.gemma3n import _config, _modules

    name, config = type(model).__name__, model.config
    params = float_params(model, params)
    module = model.bind({"params": params})
    for i, block in enumerate(module.blocks):
        if type(block) is not _modules.Block or type(block.attn) is not _modules.Attention:
            raise UnsupportedModelError(
                f"{name}'s layer {i} is {type(block).__name__} with {type(getattr(block, 'attn', None)).__name__}, "
                "not the library's Gemma 3n Block/Attention this front-end reads: export the library's own "
                "Gemma 3n transformer, or write its step as a jax2onnx_llm.DecoderSpec")
    pattern = _config.create_kv_cache_sharing_patterns(config.kv_cache_sharing_config, config.num_layers,
                                                       config.attention_types)
    # the layer whose keys and values each layer attends over: the library looks ``layer_{source}`` up
    # among the layers already run, and a layer finding none there (a source at or after it, or
    # negative) computes its own
    sharing = [source if 0 <= source < i else i for i, source in enumerate(pattern)]
    spec = DecoderSpec(
        step=_step(model, sharing), params=params, num_layers=config.num_layers, num_heads=config.num_heads,
        num_kv_heads=config.num_kv_heads, head_size=config.head_dim, hidden_size=config.embed_dim,
        vocab_size=config.num_embed, bos_token_id=BOS, eos_token_id=end_tokens(model), pad_token_id=PAD,
        model_type="decoder", family=f"gemma library {name}", prompts_start_with_bos=True,
    )
    return only_holders(spec, [i for i, source in enumerate(sharing) if source == i])


def _step(model: Any, sharing: list[int]) -> Any:
    import flax.linen as nn
    from gemma.gm.nn.gemma3n import _modules

    def step(params: Any, input_ids: Any, attention_mask: Any, position_ids: Any, cache: KVCache) -> Any:
        module = model.bind({"params": params})
        config = module.config
        # every layer's past as the step found it: a KV-shared layer attends over its source layer's
        # past and the step's keys the source computed (``computed``), as that layer itself did
        past = KVCache(tuple(cache.keys), tuple(cache.values), cache.attention_mask, cache.layout, cache.length,
                       cache.max_length)
        computed: dict[int, tuple[Any, Any]] = {}
        current = [0]  # the block being called

        def attention(next_call: Any, args: Any, kwargs: Any, context: Any) -> Any:
            if not (isinstance(context.module, _modules.Attention) and context.method_name == "__call__"):
                return next_call(*args, **kwargs)
            layer = current[0]
            h, positions = args[0], args[1]  # the block's normed input and the positions it was called with
            encoded = _attend(context.module, h, positions, layer, sharing[layer], cache, past, computed)
            return None, context.module.attn_vec_einsum("BTNH,NHD->BTD", encoded)

        x = module.embedder.encode(input_ids)
        per_layer = module.embedder.encode_per_layer_input(x, input_ids) if config.per_layer_input_dim else None
        x = module._maybe_preprocess_embeddings_with_altup(x)
        with nn.intercept_methods(attention):
            for i, block in enumerate(module.blocks):
                current[0] = i
                _, x = block(x, position_ids, None, None,
                             per_layer_input=None if per_layer is None else per_layer[..., i, :])
        x = module.final_norm(module._maybe_postprocess_embeddings_with_altup(x))
        logits = module.embedder.decode(x)
        if config.final_logit_softcap is not None:
            logits = jnp.tanh(logits / config.final_logit_softcap) * config.final_logit_softcap
        return logits, cache

    return step


def _attend(attn: Any, h: Any, positions: Any, layer: int, source: int, cache: KVCache, past: KVCache,
            computed: dict[int, tuple[Any, Any]]) -> Any:
    """The library's ``Attention.__call__`` up to ``attn_vec_einsum``, over the export's cache:
    ``(batch, seq, heads, head)``."""
    from gemma.gm.math import _positional_embeddings
    from gemma.gm.nn.gemma3n import _modules

    shared = source != layer
    if attn.use_qkv_einsum:
        q, k, v = attn.qkv_einsum("BTD,SNDH->SBTNH", h)  # a shared layer computes and drops its k, v too
    else:
        q = attn.q_einsum("BTD,NDH->BTNH", h)
        k = v = None
        if not shared:
            k, v = attn.kv_einsum("BSD,CKDH->CBSKH", h)
    rope = dict(base_frequency=attn.rope_base_frequency, scale_factor=attn.rope_scale_factor)
    if attn.use_qk_norm:
        q = attn.query_norm(q)
    q = _positional_embeddings.apply_rope(q, positions, **rope)
    window = attn.sliding_window_size if attn.attn_type == _modules.AttentionType.LOCAL_SLIDING else None
    options = dict(scale=float(attn.query_pre_attn_scalar), softcap=attn.attn_logits_soft_cap, window=window)
    if shared:
        k, v = computed[source]
        view = KVCache(past.keys, past.values, past.attention_mask, past.layout, past.length, past.max_length)
        return attend_gemma(view, source, q, k, v, reader=layer, **options)  # the view's write is dropped
    if attn.use_qk_norm:
        k = attn.key_norm(k)
    if attn.use_value_norm:
        v = attn.value_norm(v)
    k = _positional_embeddings.apply_rope(k, positions, **rope)
    computed[layer] = (k, v)
    return attend_gemma(cache, layer, q, k, v, **options)

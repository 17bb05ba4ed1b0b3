"""Gemma 3 with its vision encoder as transformers.js' ``Gemma3ForConditionalGeneration`` (model type
``gemma3``) runs it: the three sessions of PaliGemma's folder (:mod:`.web`), the image token a real
one (the tokenizer's ``<img>``, ``image_token_index``), which transformers.js' merge overwrites with
the vision encoder's features in order, row after row (KerasHub's ``vision_indices`` order).

**The image flag.** KerasHub's Gemma 3 lets each image's placeholders see each other both ways at
the prompt (``Gemma3DecoderBlock``'s bidirectional image mask); the genai decoder finds them in the
``input_ids`` it reads (``frontends/keras_hub/gemma3_vision.py``). transformers.js feeds the
decoder ``inputs_embeds``, ``attention_mask`` and, where declared, ``position_ids`` only, and its
merge replaces a placeholder's embedding row whole. So the rows carry one channel more than the
model's width: ``vision_encoder`` writes 1 there, ``embed_tokens`` 0, and the decoder reads it as
"this row is an image's" (an unbroken run of flagged rows: one image, as KerasHub's spans) before
running the library's layers on the other ``hidden`` channels. ``inputs_embeds`` and
``image_features`` are therefore ``hidden + 1`` wide; transformers.js copies rows as they are.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from ..spec import DecoderSpec
from ..web.hf_config import build_generation_config
from .decoder import decoder_inputs, decoder_step

#: the value of the last channel of an image's row (text rows: 0); a row is an image's above half of it
IMAGE_FLAG = 1.0


def flagged(fn: Any, flag: float) -> Any:
    """``fn``'s output ``(..., hidden)`` with one channel more, all ``flag``."""

    def run(*args: Any) -> Any:
        out = fn(*args)
        return jnp.concatenate([out, jnp.full((*out.shape[:-1], 1), flag, out.dtype)], axis=-1)

    return run


def flagged_decoder(spec: DecoderSpec, max_length: int, image_token_id: int) -> Any:
    """``(inputs_embeds (batch, seq, hidden + 1), attention_mask, *past) -> (logits, *present)``: the
    genai decoder's step, its ``input_ids`` rebuilt from the flag (the image token where a row is an
    image's, another id elsewhere: the step reads them only to find the image spans)."""
    step = decoder_step(spec, "concat", max_length, reads_ids=True)
    other = image_token_id + 1 if image_token_id + 1 < spec.vocab_size else image_token_id - 1

    def run(inputs_embeds: Any, attention_mask: Any, *past: Any) -> tuple[Any, ...]:
        is_image = inputs_embeds[..., -1] > IMAGE_FLAG / 2
        ids = jnp.where(is_image, image_token_id, other).astype(jnp.int32)
        return step(inputs_embeds[..., :-1], ids, attention_mask, *past)

    return run


def flagged_decoder_inputs(spec: DecoderSpec, max_length: int) -> list[Any]:
    """The genai decoder's input specs without ``input_ids``, ``inputs_embeds`` one channel wider."""
    embeds, *rest = decoder_inputs(spec, "concat", max_length)
    return [jax.ShapeDtypeStruct((*embeds.shape[:-1], embeds.shape[-1] + 1), embeds.dtype), *rest]


def gemma3_config(spec: DecoderSpec, facts: dict[str, Any], image_token: int, max_length: int,
                  transformers_js: dict[str, Any]) -> dict[str, Any]:
    """``config.json``: transformers.js reads the decoder's sizes from ``text_config`` (Gemma 3's
    names: its layer count names the cache inputs it feeds) and the image token id."""
    special = {k: v for k, v in build_generation_config(spec).items() if k.endswith("_token_id")}
    return {
        "architectures": ["Gemma3ForConditionalGeneration"],
        "model_type": "gemma3",
        "image_token_index": image_token,
        "mm_tokens_per_image": facts["image_tokens"],
        "text_config": {"model_type": "gemma3_text", "num_hidden_layers": spec.num_layers,
                        "num_attention_heads": spec.num_heads, "num_key_value_heads": spec.num_kv_heads,
                        "head_dim": spec.head_size, "hidden_size": spec.hidden_size, "vocab_size": spec.vocab_size,
                        "max_position_embeddings": max_length},
        "vision_config": {"image_size": facts["image_size"]},
        # the rows' width transformers.js' merge copies (see the module doc: the image flag)
        "jax2onnx_inputs_embeds_width": spec.hidden_size + 1,
        "vocab_size": spec.vocab_size,
        **special,
        "use_cache": True,
        "transformers.js_config": transformers_js,
    }

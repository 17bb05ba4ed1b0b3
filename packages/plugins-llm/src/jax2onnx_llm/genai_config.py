"""``genai_config.json``: what onnxruntime-genai reads to run the exported decoder.

The fields are onnxruntime-genai's decoder-only config: ``model.decoder`` names the graph's inputs
and outputs (``past_key_names``/``present_key_names`` are ``%d`` patterns over layers) and gives
the head counts and sizes it allocates caches from; ``search`` holds generation defaults, with
``past_present_share_buffer`` selecting the static ``max_length`` cache buffer.
"""

from __future__ import annotations

from typing import Any

from .spec import DecoderSpec

FILE = "genai_config.json"


def build(spec: DecoderSpec, *, filename: str, max_length: int, cache: str,
          search: dict[str, Any] | None = None) -> dict[str, Any]:
    # ids resolved and checked by special_tokens.resolve: the pad id is the one the graph detects padding by
    eos = spec.eos_token_id
    pad = spec.pad_token_id
    config: dict[str, Any] = {
        "model": {
            "bos_token_id": spec.bos_token_id if spec.bos_token_id is not None else 0,
            "context_length": max_length,
            "decoder": {
                "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
                "filename": filename,
                "head_size": spec.head_size,
                "hidden_size": spec.hidden_size,
                "inputs": {
                    "input_ids": "input_ids",
                    "attention_mask": "attention_mask",
                    "past_key_names": "past_key_values.%d.key",
                    "past_value_names": "past_key_values.%d.value",
                },
                "outputs": {
                    "logits": "logits",
                    "present_key_names": "present.%d.key",
                    "present_value_names": "present.%d.value",
                },
                "num_attention_heads": spec.num_heads,
                "num_hidden_layers": spec.num_layers,
                "num_key_value_heads": spec.num_kv_heads,
            },
            "eos_token_id": eos,
            "pad_token_id": pad,
            "type": spec.model_type,
            "vocab_size": spec.vocab_size,
        },
        "search": {
            "diversity_penalty": 0.0,
            "do_sample": False,
            "early_stopping": True,
            "length_penalty": 1.0,
            "max_length": max_length,
            "min_length": 0,
            "no_repeat_ngram_size": 0,
            "num_beams": 1,
            "num_return_sequences": 1,
            "past_present_share_buffer": cache == "shared",
            "repetition_penalty": 1.0,
            "temperature": 1.0,
            "top_k": 50,
            "top_p": 1.0,
        },
    }
    if search:
        unknown = sorted(set(search) - set(config["search"]))
        if unknown:
            from .errors import OptionError

            raise OptionError(f"search options {unknown} are not genai_config.json search fields; "
                              f"use some of {sorted(config['search'])}")
        config["search"].update(search)
    return config

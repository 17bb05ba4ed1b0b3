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

#: onnxruntime-genai's generation defaults the folder writes (``search``); ``max_length`` and
#: ``past_present_share_buffer`` come from the export's ``max_length=`` and ``cache=``. The type of
#: each default is the type ``search=`` must give.
SEARCH_DEFAULTS: dict[str, Any] = {
    "diversity_penalty": 0.0,
    "do_sample": False,
    "early_stopping": True,
    "length_penalty": 1.0,
    "min_length": 0,
    "no_repeat_ngram_size": 0,
    "num_beams": 1,
    "num_return_sequences": 1,
    "repetition_penalty": 1.0,
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
}
#: what ``search=`` may set: the defaults above, and a generation length below the context length
SEARCH_FIELDS: dict[str, type] = {**{k: type(v) for k, v in SEARCH_DEFAULTS.items()}, "max_length": int}


def check_search(search: Any, *, max_length: int) -> dict[str, Any]:
    """``search=``'s overrides, checked before the export (an unknown field or a value of the wrong
    type would otherwise surface when onnxruntime-genai loads the folder)."""
    from .errors import OptionError

    if search is None:
        return {}
    if not isinstance(search, dict):
        raise OptionError(f"search={search!r}: give a dict of genai_config.json search options, e.g. {{'do_sample': True}}")
    if "past_present_share_buffer" in search:
        raise OptionError("search: past_present_share_buffer follows the graph's cache layout; pass cache='shared' "
                          "(or 'concat') instead")
    unknown = sorted(set(search) - set(SEARCH_FIELDS))
    if unknown:
        raise OptionError(f"search options {unknown} are not genai_config.json search fields; "
                          f"use some of {sorted(SEARCH_FIELDS)}")
    for name, value in search.items():
        kind = SEARCH_FIELDS[name]
        fits = (isinstance(value, bool) if kind is bool else
                not isinstance(value, bool) and isinstance(value, (int, float) if kind is float else int))
        if not fits:
            want = "True or False" if kind is bool else "an int" if kind is int else "a number"
            raise OptionError(f"search option {name}={value!r}: give {want}")
    if not 1 <= search.get("max_length", max_length) <= max_length:
        raise OptionError(f"search option max_length={search['max_length']}: the generation length is at most the "
                          f"export's max_length ({max_length}), the context the graph encodes")
    return dict(search)


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
        "search": dict(sorted({**SEARCH_DEFAULTS, "max_length": max_length, "past_present_share_buffer": cache == "shared",
                               **check_search(search, max_length=max_length)}.items())),
    }
    from .stateful import StatefulDecoderSpec, genai_decoder_names

    if isinstance(spec, StatefulDecoderSpec):  # conv / recurrent state inputs beside (or instead of) the KV cache
        decoder = config["model"]["decoder"]
        decoder["inputs"], decoder["outputs"] = genai_decoder_names(spec)
    return config

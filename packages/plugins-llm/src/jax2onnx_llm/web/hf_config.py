"""``config.json`` and ``generation_config.json`` as transformers.js reads them.

transformers.js picks its model class by ``config.json``'s ``model_type`` and reads a few sizes from
it under that architecture's key names (the layer count decides which ``past_key_values.N`` inputs it
feeds). The cache's shapes and dtype it reads from the graph's input metadata, the positions it
passes as ``position_ids`` when the graph has that input. So any architecture whose decoding is the
plain one (feed ids, mask, positions and the cache; read logits and the new cache) runs the graph
exactly; the one written is the model's own where transformers.js has it, else ``llama`` (its
plain decoder: an NNX model or a ``DecoderSpec`` with no Hugging Face counterpart).
"""

from __future__ import annotations

from typing import Any

from jax2onnx.targets.web.folder import TRANSFORMERS_JS_KEY

from ..spec import DecoderSpec

GENERATION_CONFIG_FILE = "generation_config.json"

#: the spec's ``model_type`` (the front-ends' family names) -> the Hugging Face ``model_type``
#: transformers.js 4 decodes with its plain decoder (``getNormalizedConfig`` in its configs.js)
HF_MODEL_TYPES = {
    "gpt2": "gpt2", "llama": "llama", "llama3": "llama", "mistral": "mistral", "qwen": "qwen2", "qwen2": "qwen2",
    "qwen3": "qwen3", "gemma": "gemma", "gemma2": "gemma2", "gemma3": "gemma3_text", "phi3": "phi3",
    "gpt_neo": "gpt_neo", "gptj": "gptj", "opt": "opt", "bloom": "bloom",
}
#: a front-end's generic spec (KerasHub's cached-call protocol: ``model_type="decoder"``) names the
#: library class in ``family``; its start, lower-cased -> the Hugging Face ``model_type`` (longest first)
CLASS_PREFIXES = (
    ("qwen3", "qwen3"), ("qwen", "qwen2"), ("gemma3", "gemma3_text"), ("gemma2", "gemma2"), ("gemma", "gemma"),
    ("llama", "llama"), ("mistral", "mistral"), ("phi3", "phi3"), ("gpt2", "gpt2"), ("gptneox", "gpt_neox"),
    ("gptneo", "gpt_neo"), ("gptj", "gptj"), ("bloom", "bloom"), ("opt", "opt"), ("falcon", "falcon"),
)
#: a library's class-name prefix that says nothing of the architecture (transformers' ``Flax``)
LIBRARY_PREFIXES = ("flax",)
#: the plain decoder an unknown family is written as
FALLBACK_MODEL_TYPE = "llama"
#: architectures that read their sizes under GPT-2's names (``n_layer``, ``n_head``, ``n_embd``)
GPT2_NAMES = {"gpt2", "gptj", "bloom"}


def hf_model_type(spec: DecoderSpec) -> str:
    """The Hugging Face ``model_type`` the folder declares for ``spec`` (see the module doc): the
    family's own, else the one its library class is named after (``FlaxGPT2LMHeadModel``, KerasHub's
    ``Qwen3CausalLM``), else ``llama``."""
    if spec.model_type in HF_MODEL_TYPES:
        return HF_MODEL_TYPES[spec.model_type]
    class_name = spec.family.split()[-1].lower() if spec.family else ""
    class_name = next((class_name[len(p):] for p in LIBRARY_PREFIXES if class_name.startswith(p)), class_name)
    return next((hf for prefix, hf in CLASS_PREFIXES if class_name.startswith(prefix)), FALLBACK_MODEL_TYPE)


def build_config(spec: DecoderSpec, *, max_length: int, transformers_js: dict[str, Any]) -> dict[str, Any]:
    """``config.json``: the architecture, its sizes under every name transformers.js reads for it, the
    special tokens, and ``transformers.js_config``."""
    model_type = hf_model_type(spec)
    sizes: dict[str, Any] = {
        "num_hidden_layers": spec.num_layers, "num_attention_heads": spec.num_heads,
        "num_key_value_heads": spec.num_kv_heads, "hidden_size": spec.hidden_size, "head_dim": spec.head_size,
        "vocab_size": spec.vocab_size, "max_position_embeddings": max_length,
    }
    if model_type in GPT2_NAMES:
        sizes.update(n_layer=spec.num_layers, n_head=spec.num_heads, n_embd=spec.hidden_size, n_positions=max_length)
    if model_type == "gpt_neo":
        sizes.update(num_layers=spec.num_layers, num_heads=spec.num_heads)
    return {
        "architectures": [_architecture(model_type)],
        "model_type": model_type,
        **sizes,
        **_special_tokens(spec),
        "use_cache": True,
        TRANSFORMERS_JS_KEY: transformers_js,
    }


def build_generation_config(spec: DecoderSpec) -> dict[str, Any]:
    """``generation_config.json``: greedy decoding stopping at the model's end token(s)."""
    return {**_special_tokens(spec), "do_sample": False}


def _special_tokens(spec: DecoderSpec) -> dict[str, Any]:
    tokens = {"bos_token_id": spec.bos_token_id, "eos_token_id": spec.eos_token_id, "pad_token_id": spec.pad_token_id}
    return {k: v for k, v in tokens.items() if v is not None}


def _architecture(model_type: str) -> str:
    """Informational (transformers.js picks the class by ``model_type``): the causal-LM class name."""
    if model_type == "gpt2":
        return "GPT2LMHeadModel"
    return "".join(part.capitalize() for part in model_type.split("_") if part != "text") + "ForCausalLM"

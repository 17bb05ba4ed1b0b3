"""jax2onnx-llm: causal language models as onnxruntime-genai model folders (KV cache, GQA, RoPE).

    from jax2onnx_llm import export_causal_lm
    export_causal_lm(model, "out/tiny-llama", max_length=128)
"""

from .attention import attend
from .errors import (
    CacheLayoutError,
    LlmExportError,
    MaxLengthError,
    OptionError,
    TokenizerError,
    UnsupportedModelError,
    WeightsError,
)
from .export import export_causal_lm
from .greedy_check import greedy_agreement
from .spec import DecoderSpec, KVCache, apply_rotary, rotary_tables

__version__ = "0.18.0"

__all__ = [
    "CacheLayoutError",
    "DecoderSpec",
    "KVCache",
    "LlmExportError",
    "MaxLengthError",
    "OptionError",
    "TokenizerError",
    "UnsupportedModelError",
    "WeightsError",
    "apply_rotary",
    "attend",
    "export_causal_lm",
    "greedy_agreement",
    "rotary_tables",
]

"""Errors of the LLM export: each names the problem and what to do, in one line."""

from __future__ import annotations

from jax2onnx.errors import InputSpecError, Jax2OnnxError


class LlmExportError(Jax2OnnxError):
    """An LLM export the pack cannot do as asked."""


class UnsupportedModelError(LlmExportError, TypeError):
    """The object is no causal LM family this pack knows."""


class CacheLayoutError(LlmExportError, ValueError):
    """The model cannot run with the requested KV-cache layout."""


class MaxLengthError(LlmExportError, ValueError):
    """``max_length`` is not a length the model can generate to."""


class TokenizerError(LlmExportError, FileNotFoundError):
    """A tokenizer file is missing or the tokenizer cannot be saved."""


class OptionError(LlmExportError, InputSpecError):
    """An option of ``export_causal_lm`` has a value it does not take."""


class WeightsError(LlmExportError, InputSpecError):
    """A ``weights=`` source that does not hold the model's weights as the model declares them."""

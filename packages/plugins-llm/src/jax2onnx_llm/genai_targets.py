"""The targets ``export_causal_lm`` writes for, asked of each target (never by its name): those
declaring that onnxruntime-genai runs a folder of their models (those declaring transformers.js get a
browser folder instead), and by default the first of them
that runs genai's fused attention op."""

from __future__ import annotations

from typing import Any

from jax2onnx.targets import MS_DOMAIN, available_targets

#: What a target declares when onnxruntime-genai runs a folder of its models (``Target.can``).
GENAI = "genai"
#: What a target declares when its models run in the browser through transformers.js: ``export_causal_lm``
#: then writes the folder transformers.js loads (``web/``).
TRANSFORMERS_JS = "transformers.js"
#: The op whose target ``export_causal_lm`` picks when none is named: genai's fused attention.
FUSED_ATTENTION = ("GroupQueryAttention", MS_DOMAIN)


def genai_targets() -> list[Any]:
    """The registered targets onnxruntime-genai runs a folder of."""
    return [t for t in available_targets() if t.can(GENAI)]


def web_targets() -> list[Any]:
    """The registered targets ``export_causal_lm`` writes a transformers.js folder for."""
    return [t for t in available_targets() if t.can(TRANSFORMERS_JS)]


def default_genai_target() -> str:
    """The target ``export_causal_lm(target=None)`` writes for: the first genai target running its
    fused attention."""
    return next(t.name for t in genai_targets() if t.allows(*FUSED_ATTENTION))


__all__ = ["FUSED_ATTENTION", "GENAI", "TRANSFORMERS_JS", "default_genai_target", "genai_targets", "web_targets"]

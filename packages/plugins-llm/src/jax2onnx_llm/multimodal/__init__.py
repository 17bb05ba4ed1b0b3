"""Vision-language models as onnxruntime-genai multimodal folders (vision, embedding and decoder
graphs): :func:`export_multimodal_lm` writes one, :func:`generate` runs it on an image's pixels."""

from .export import export_multimodal_lm
from .run import generate, pixel_values_from_file, prompt_ids

__all__ = ["export_multimodal_lm", "generate", "pixel_values_from_file", "prompt_ids"]

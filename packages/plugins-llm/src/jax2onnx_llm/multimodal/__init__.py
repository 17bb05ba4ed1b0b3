"""Multimodal models as onnxruntime-genai folders: vision-language models (vision, embedding and
decoder graphs; :func:`export_multimodal_lm`, run by :func:`generate` on an image's pixels) and
speech-to-text models (encoder and decoder graphs; :func:`export_speech_to_text`, run by
:func:`transcribe` on log-mel features, or raw audio for Moonshine)."""

from .export import export_multimodal_lm
from .run import generate, pixel_values_from_file, prompt_ids
from .whisper import export_speech_to_text, transcribe

__all__ = ["export_multimodal_lm", "export_speech_to_text", "generate", "pixel_values_from_file", "prompt_ids",
           "transcribe"]

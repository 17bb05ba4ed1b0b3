"""Export targets as objects: ``onnx`` (default), ``onnxruntime``, ``tensorrt``, ``web``, and those
packs register (see :mod:`.base`)."""

from __future__ import annotations

from .base import MS_DOMAIN, STANDARD_DOMAINS, Target, available_targets, get_target, register_target, target_names

__all__ = ["MS_DOMAIN", "STANDARD_DOMAINS", "Target", "available_targets", "get_target", "register_target",
           "target_names"]
